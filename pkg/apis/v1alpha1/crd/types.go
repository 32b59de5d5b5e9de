// Package crd is the ClusterVIPs custom resource: the spec of the cluster
// file (v1alpha1.ClusterVIPsSpec, the same Go type and the same
// validation markers) under Kubernetes' object metadata, with a status.
// controller-gen generates the CustomResourceDefinition from it
// (hack/update.sh writes pkg/manifests/crds/); docs/api.md says what the
// apiserver refuses and what only `vipctl validate` does.
//
// The file's own root type stays v1alpha1.ClusterVIPs: its metadata is
// the cluster file's (a name, labels and annotations, decoded strictly)
// and it has no status, so the file accepts exactly what it did before
// the resource existed.
//
// +groupName=vipctl.io
// +versionName=v1alpha1
package crd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Resource is the ClusterVIPs custom resource, for the dynamic client.
var Resource = schema.GroupVersionResource{Group: "vipctl.io", Version: "v1alpha1", Resource: "clustervips"}

// ClusterVIPs is every virtual IP of one cluster: the API VIPs, one entry
// per IngressController, pools for Services of type LoadBalancer and how
// VRRP runs between the nodes. One object per cluster, cluster-scoped,
// named as the OpenShift cluster is (metadata.name feeds the VRRP ID
// computation, as the cluster file's metadata.name does).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=clustervips,singular=clustervips,shortName=cvips,categories=vipctl
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="API VIPs",type=string,JSONPath=`.spec.api.vips`
// +kubebuilder:printcolumn:name="API Holder",type=string,JSONPath=`.status.vips[?(@.instance=="api")].holder`
// +kubebuilder:printcolumn:name="Ingress Holder",type=string,JSONPath=`.status.vips[?(@.instance=="ingress")].holder`,priority=1
// +kubebuilder:printcolumn:name="In Use",type=integer,JSONPath=`.status.addressesInUse`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.addressesFree`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name is the OpenShift cluster name: a DNS-1123 label (at most 63 of a-z 0-9 -, beginning and ending alphanumeric)"
type ClusterVIPs struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. Its name is the OpenShift cluster name,
	// as given to the installer: it feeds the VRRP ID computation.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state of every VIP: the spec of the cluster
	// file (docs/config-reference.md).
	Spec v1alpha1.ClusterVIPsSpec `json:"spec"`
	// Status is what the nodes and the allocator report: who holds each
	// VIP, how full each pool is, which generation each node runs.
	// +optional
	Status ClusterVIPsStatus `json:"status,omitempty"`
}

// ClusterVIPsList is a list of ClusterVIPs.
//
// +kubebuilder:object:root=true
type ClusterVIPsList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterVIPs objects (one per cluster).
	Items []ClusterVIPs `json:"items"`
}
