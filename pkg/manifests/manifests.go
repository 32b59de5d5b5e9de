// Package manifests builds, as typed objects, the Kubernetes manifests
// `vipctl render` writes to DIR/manifests/: the vipctl namespace, the
// allocator (ServiceAccount, RBAC with exactly the verbs it uses,
// Deployment, PodDisruptionBudget), the ConfigMap with the live config,
// and the extra reads the node sidecars need.
package manifests

import (
	"bytes"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/status"
)

// Names of the allocator's objects.
const (
	AllocatorName = "vipctl-allocator"
	// AllocatorPort serves the allocator's /healthz and /readyz to the
	// kubelet, plainly on the pod network; its /metrics is on
	// spec.monitoring.port, TLS, for authorized scrapers only.
	AllocatorPort = 9446
)

// allocatorSelector picks the allocator's pods.
func allocatorSelector() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "vipctl", "app.kubernetes.io/component": "allocator"}
}

// Objects returns every manifest in apply order.
func Objects(c *v1alpha1.ClusterVIPs) ([]runtime.Object, error) {
	cfg, err := c.ShippedYAML()
	if err != nil {
		return nil, err
	}
	objs := []runtime.Object{
		Namespace(c),
		&corev1.ConfigMap{TypeMeta: tm("v1", "ConfigMap"),
			ObjectMeta: meta(v1alpha1.ConfigMapName, "config"),
			Data:       map[string]string{v1alpha1.ConfigMapKey: string(cfg)}},
	}
	objs = append(objs, Allocator(c)...)
	objs = append(objs, NodeReaders(c)...)
	return objs, nil
}

// Pod Security admission: the namespace's labels name the level its pods
// are held to, and OpenShift's label syncer is told to leave them.
const (
	podSecurityEnforce = "pod-security.kubernetes.io/enforce"
	podSecurityAudit   = "pod-security.kubernetes.io/audit"
	podSecurityWarn    = "pod-security.kubernetes.io/warn"
	// PodSecurityLevel is vipctl-system's level. The kubelet creates a
	// mirror pod for each static pod here, and admission judges mirror
	// pods like any other: keepalived's, haproxy's and FRR's pods use
	// host networking, host paths and added capabilities (NET_ADMIN,
	// NET_RAW, ...), which only the privileged level admits; a mirror pod
	// refused leaves the pod running but invisible to the API (vipctl
	// status reads the mirror pods). The allocator passes restricted
	// (TestAllocatorRunsRestricted) and shares the namespace. OpenShift's
	// own on-prem namespaces (openshift-kni-infra, ...) are labelled the
	// same way.
	PodSecurityLevel = "privileged"
	// openShiftLabelSync turned off keeps OpenShift's cluster-policy-
	// controller from rewriting the pod-security labels from the SCCs
	// the namespace's ServiceAccounts may use: the allocator's would give
	// restricted, and the mirror pods would be refused.
	openShiftLabelSync = "security.openshift.io/scc.podSecurityLabelSync"
)

// Namespace is vipctl-system, labelled for Pod Security admission and,
// for OpenShift's cluster monitoring, with the label its Prometheus
// selects namespaces by. It opens both manifests/vipctl.yaml and
// manifests/monitoring.yaml, so that `oc apply -f DIR/manifests/` finds it
// whichever file comes first.
func Namespace(c *v1alpha1.ClusterVIPs) *corev1.Namespace {
	l := labels("namespace")
	for _, k := range []string{podSecurityEnforce, podSecurityAudit, podSecurityWarn} {
		l[k] = PodSecurityLevel
	}
	l[openShiftLabelSync] = "false"
	if c.Spec.MonitoringStack() == v1alpha1.MonitoringOpenShift {
		l[clusterMonitoringLabel] = "true"
	}
	return &corev1.Namespace{TypeMeta: tm("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: onnode.Namespace, Labels: l}}
}

// Marshal writes objects as one multi-document YAML stream.
func Marshal(objs []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

func tm(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func labels(component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "vipctl", "app.kubernetes.io/component": component}
}

func meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: onnode.Namespace, Labels: labels(component)}
}

// Allocator is the allocator's ServiceAccount, RBAC, Deployment and
// PodDisruptionBudget. The RBAC grants exactly what it does:
//
//   - Services, cluster-wide: get/list/watch (every LoadBalancer Service)
//     and update of services/status (status.loadBalancer.ingress);
//   - Events, cluster-wide: create/patch (AllocationFailed, IPAllocated,
//     IPReleased on the Services);
//   - the vipctl ConfigMap in its namespace: get/list/watch (the pools);
//   - its Lease in its namespace: get/update, and create (which RBAC
//     cannot narrow to a name) for leader election;
//   - Nodes and the ClusterVIPs objects: get/list/watch, and update of
//     clustervips/status (pkg/statuswriter); the kubelets' Leases in
//     kube-node-lease: get/list/watch (an isolated holder is no split
//     brain).
func Allocator(c *v1alpha1.ClusterVIPs) []runtime.Object {
	m := meta(AllocatorName, "allocator")
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AllocatorName, Namespace: onnode.Namespace}}
	read := []string{"get", "list", "watch"}
	clusterMeta := metav1.ObjectMeta{Name: AllocatorName, Labels: m.Labels}
	nodeLeaseMeta := metav1.ObjectMeta{Name: AllocatorName, Namespace: status.NodeLeaseNamespace, Labels: m.Labels}
	selector := allocatorSelector()
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(AllocatorPort)}},
			PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	return []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: tm("v1", "ServiceAccount"), ObjectMeta: m},
		&rbacv1.ClusterRole{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: clusterMeta,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"services/status"}, Verbs: []string{"update"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				// The ClusterVIPs status (pkg/statuswriter): who holds
				// what, from the nodes' annotations.
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: read},
				{APIGroups: []string{"vipctl.io"}, Resources: []string{"clustervips"}, Verbs: read},
				{APIGroups: []string{"vipctl.io"}, Resources: []string{"clustervips/status"}, Verbs: []string{"update"}},

				// Asking the API server who a scraper of /metrics is and
				// whether it may get it (pkg/metricsserver); the nodes'
				// sidecars have these from the Node authorizer.
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			}},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: clusterMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AllocatorName}, Subjects: subject},
		&rbacv1.Role{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: m,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{v1alpha1.ConfigMapName}, Verbs: read},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{v1alpha1.AllocatorLeaseName}, Verbs: []string{"get", "update"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			}},
		&rbacv1.RoleBinding{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: m,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AllocatorName}, Subjects: subject},
		// The kubelets' Leases, for the ClusterVIPs status: an isolated
		// holder is no split brain (status.Reach).
		&rbacv1.Role{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: nodeLeaseMeta,
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: read}}},
		&rbacv1.RoleBinding{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: nodeLeaseMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AllocatorName}, Subjects: subject},
		&appsv1.Deployment{TypeMeta: tm("apps/v1", "Deployment"), ObjectMeta: m,
			Spec: appsv1.DeploymentSpec{
				// Two replicas, one leader: a node loss costs one Lease
				// duration of allocation delay, never an address.
				Replicas: ptr.To(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec: corev1.PodSpec{
						ServiceAccountName: AllocatorName,
						PriorityClassName:  "system-cluster-critical",
						SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
								PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}},
						}},
						Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
							{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
						// The service CA's certificate on OpenShift; absent
						// elsewhere, and then the allocator serves a
						// self-signed one.
						Volumes: []corev1.Volume{{Name: "metrics-tls", VolumeSource: corev1.VolumeSource{
							Secret: &corev1.SecretVolumeSource{SecretName: AllocatorMetricsSecret, Optional: ptr.To(true)}}}},
						Containers: []corev1.Container{{
							Name:    "allocator",
							Image:   c.Spec.Images.Vipctl,
							Command: []string{"vipctl"},
							Args: []string{"allocator", "--namespace", onnode.Namespace, "--listen", fmt.Sprintf(":%d", AllocatorPort), "--id", "$(POD_NAME)",
								"--metrics-listen", fmt.Sprintf(":%d", c.Spec.MetricsPort()),
								"--metrics-cert", AllocatorMetricsCertDir + "/" + corev1.TLSCertKey, "--metrics-key", AllocatorMetricsCertDir + "/" + corev1.TLSPrivateKeyKey},
							Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
							Ports:        []corev1.ContainerPort{{Name: "health", ContainerPort: AllocatorPort}, {Name: metricsPortName, ContainerPort: c.Spec.MetricsPort()}},
							VolumeMounts: []corev1.VolumeMount{{Name: "metrics-tls", MountPath: AllocatorMetricsCertDir, ReadOnly: true}},
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
							LivenessProbe:  probe("/healthz"),
							ReadinessProbe: probe("/readyz"),
							SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						}},
					},
				},
			}},
		&policyv1.PodDisruptionBudget{TypeMeta: tm("policy/v1", "PodDisruptionBudget"), ObjectMeta: m,
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: selector}}},
	}
}
