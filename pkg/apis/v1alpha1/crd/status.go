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
// spec. The allocator's leader writes it (pkg/statuswriter) from what the
// nodes publish on their Node objects and from the Services' addresses.
type ClusterVIPsStatus struct {
	// ObservedGeneration is the generation of the spec this status was
	// computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// SpecDigest names the spec of ObservedGeneration by its content, as
	// each node names the spec it runs (nodes[].specDigest).
	// +optional
	SpecDigest string `json:"specDigest,omitempty"`
	// Conditions are Ready and Degraded, each with a reason
	// (a CamelCase word) and a message for people.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// VIPs says which node holds each VIP of the spec: the API, api-int
	// and ingress VIPs (a Service's address: vipctl status).
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
	// AddressesInUse is how many addresses of all pools Services hold
	// (the sum of pools[].inUse, for oc get).
	// +optional
	AddressesInUse int64 `json:"addressesInUse,omitempty"`
	// AddressesFree is how many addresses of all pools are left (the sum
	// of pools[].free, stopping at the largest int64).
	// +optional
	AddressesFree int64 `json:"addressesFree,omitempty"`
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
	// Holder is the node that holds the VIP; empty when none does,
	// several separated by commas in a split brain.
	// +optional
	Holder string `json:"holder,omitempty"`
	// State is ok (one holder), no-holder or split-brain, as vipctl
	// status says.
	// +optional
	State string `json:"state,omitempty"`
	// Since is when Holder took the VIP (the latest of them in a split
	// brain), or when the last holder was seen gone.
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
	// ObservedGeneration is the last generation of the spec the node's
	// sidecar was seen to run: the digest it publishes
	// (vipctl.io/config) was that generation's. 0: never seen running
	// one (a sidecar older than v0.2.0 publishes no digest).
	ObservedGeneration int64 `json:"observedGeneration"`
	// SpecDigest names the spec the node's sidecar last applied (its
	// vipctl.io/config annotation); the node runs the object's spec when
	// it is status.specDigest. It differs while a change has not
	// reached the node, and for good when the vipctl-config ConfigMap,
	// which the sidecars still read, says something else than the
	// object.
	// +optional
	SpecDigest string `json:"specDigest,omitempty"`
	// Source is where the node's sidecar reads its live config:
	// clustervips (this object, once migrated), configmap (the
	// vipctl-config ConfigMap) or file (its cluster file alone).
	// +optional
	Source string `json:"source,omitempty"`
}
