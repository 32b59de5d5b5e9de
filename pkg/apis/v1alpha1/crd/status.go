package crd

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The condition types of ClusterVIPsStatus.
const (
	// ConditionReady is True when every VIP is held by exactly one node
	// and every node runs the object's current generation.
	ConditionReady = "Ready"
	// ConditionDegraded is True when something is wrong that a person
	// should look at (a VIP without holder, a node that cannot render,
	// a pool out of addresses); its reason and message say what.
	ConditionDegraded = "Degraded"
)

// ClusterVIPsStatus is what the cluster reports about the VIPs of the
// spec. Nothing writes it yet: the sidecars and the allocator read the
// vipctl-config ConfigMap until the migration to the custom resource.
type ClusterVIPsStatus struct {
	// ObservedGeneration is the generation of the spec this status was
	// computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready and Degraded, each with a reason
	// (a CamelCase word) and a message for people.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// VIPs says which node holds each VIP: the API, api-int and ingress
	// VIPs and the anchor of each VRRP instance of a pool.
	// +listType=map
	// +listMapKey=address
	// +optional
	VIPs []VIPStatus `json:"vips,omitempty"`
	// Pools says how many addresses of each Service pool are in use and
	// how many are free.
	// +listType=map
	// +listMapKey=name
	// +optional
	Pools []PoolStatus `json:"pools,omitempty"`
	// Nodes says which generation of the spec each node's sidecar has
	// rendered and applied.
	// +listType=map
	// +listMapKey=name
	// +optional
	Nodes []NodeStatus `json:"nodes,omitempty"`
}

// VIPStatus is the holder of one VIP.
type VIPStatus struct {
	// Address is the VIP.
	Address string `json:"address"`
	// Instance is the key of the VRRP instance that carries it ("api",
	// "api-int", "ingress/<name>", "pool/<name>/<n>"), as in
	// spec.vrrp.virtualRouterIDs.
	Instance string `json:"instance"`
	// Holder is the node that holds the VIP; empty when none does.
	// +optional
	Holder string `json:"holder,omitempty"`
	// Since is when Holder took the VIP (or lost it, when Holder is
	// empty).
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// PoolStatus is the use of one Service pool.
type PoolStatus struct {
	// Name is the pool's name in spec.servicePools.
	Name string `json:"name"`
	// InUse is the number of the pool's addresses held by Services.
	InUse int64 `json:"inUse"`
	// Free is the number of the pool's addresses left for Services (the
	// instances' anchors are neither in use nor free). An IPv6 pool may
	// have more than fit: the count stops at the largest int64.
	Free int64 `json:"free"`
}

// NodeStatus is how far one node has come.
type NodeStatus struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// ObservedGeneration is the generation of the spec the node's
	// sidecar last rendered and applied.
	ObservedGeneration int64 `json:"observedGeneration"`
}
