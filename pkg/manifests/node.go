package manifests

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// NodeReaderName names the roles and bindings that let the node sidecars
// read what the Node authorizer does not grant them.
const NodeReaderName = "vipctl-node-reader"

// nodesGroup is the group every kubelet credential carries; a static pod's
// sidecar can only use the node's own credentials.
const nodesGroup = "system:nodes"

// NodeReaders grants group system:nodes the reads the sidecar needs beyond
// what the Node authorizer already allows (Services, its own Node and
// patching it, Events), each as narrow as RBAC can express:
//
//   - get/list/watch of Nodes, cluster-wide (peers, roles, addresses);
//     since Kubernetes 1.32 the Node authorizer lets a node read only its
//     own Node object,
//   - get/list/watch of the one vipctl ConfigMap (the day-2 pools),
//   - get/list/watch of EndpointSlices, cluster-wide (which apiservers
//     serve, from default/kubernetes: haproxy's backends; which nodes run
//     ready endpoints of externalTrafficPolicy Local Services) — the same
//     read kube-proxy has on every node,
//   - get/list/watch of the cluster's own ClusterVIPs object (by name),
//     the live config once migrated,
//   - get/list/watch of pods in each IngressController's router namespace
//     (which nodes run its routers, and are they ready); the Node
//     authorizer only lets a node list the pods bound to itself.
//
// Nothing here is a write: the node identity still cannot write Service
// status, ConfigMaps or Leases (the allocator does that, with its own
// ServiceAccount).
func NodeReaders(c *v1alpha1.ClusterVIPs) []runtime.Object {
	read := []string{"get", "list", "watch"}
	clusterMeta := metav1.ObjectMeta{Name: NodeReaderName, Labels: labels("node-sidecar")}
	objs := []runtime.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   tm(rbacv1.SchemeGroupVersion.String(), "ClusterRole"),
			ObjectMeta: clusterMeta,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: read},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
				// The cluster's own ClusterVIPs object, the live
				// config once migrated (pkg/configsource).
				{APIGroups: []string{"vipctl.io"}, Resources: []string{"clustervips"}, ResourceNames: []string{c.Metadata.Name}, Verbs: read},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   tm(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"),
			ObjectMeta: clusterMeta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeReaderName},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodesGroup}},
		},
	}
	add := func(ns string, rules ...rbacv1.PolicyRule) {
		meta := metav1.ObjectMeta{Name: NodeReaderName, Namespace: ns, Labels: labels("node-sidecar")}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: meta, Rules: rules},
			&rbacv1.RoleBinding{
				TypeMeta:   tm(rbacv1.SchemeGroupVersion.String(), "RoleBinding"),
				ObjectMeta: meta,
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: NodeReaderName},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodesGroup}},
			})
	}
	// List and watch honour resourceNames only with a metadata.name field
	// selector, which is how the sidecar asks.
	own := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{v1alpha1.ConfigMapName}, Verbs: read}}
	// The BGP peers' passwords: get on those Secrets alone, never list
	// (a list would hand every node the namespace's other Secrets).
	if secrets := c.BGPPasswordSecrets(); len(secrets) > 0 {
		own = append(own, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: secrets, Verbs: []string{"get"}})
	}
	add(onnode.Namespace, own...)
	seen := map[string]bool{}
	for _, in := range c.Spec.Ingress {
		if seen[in.RouterNamespace] {
			continue
		}
		seen[in.RouterNamespace] = true
		add(in.RouterNamespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read})
	}
	return objs
}
