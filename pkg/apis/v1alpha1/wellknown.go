package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Names the cluster's objects meet at. The sidecar, the allocator and
// `vipctl update`/`vipctl status` all use these, so they are defined once.
const (
	// ConfigMapName is the ConfigMap (in the vipctl namespace) holding the
	// live ClusterVIPs under ConfigMapKey. Its spec.servicePools and
	// spec.vrrp.virtualRouterIDs/avoidVirtualRouterIDs are the day-2
	// editable parts: sidecars take them from here, everything else from
	// the file the MachineConfig laid down.
	ConfigMapName = "vipctl-config"
	// ConfigMapKey is the data key of the ClusterVIPs YAML.
	ConfigMapKey = "cluster.yaml"

	// LoadBalancerClass is the spec.loadBalancerClass vipctl serves; a
	// Service with no class is served too, one with another class is not.
	LoadBalancerClass = "vipctl.io/keepalived"
	// AnnotationLoadBalancerIPs requests addresses, comma-separated (one per
	// family), like MetalLB's metallb.universe.tf/loadBalancerIPs.
	AnnotationLoadBalancerIPs = "vipctl.io/load-balancer-ips"
	// AnnotationPool names the pool to allocate from.
	AnnotationPool = "vipctl.io/pool"
	// AnnotationAllowSharedIP lets Services with the same key share one
	// address when their ports do not clash.
	AnnotationAllowSharedIP = "vipctl.io/allow-shared-ip"

	// AnnotationNodeVIPs is written by each node's sidecar on its own Node:
	// the VIPs this node holds right now (JSON, see HeldVIPs).
	AnnotationNodeVIPs = "vipctl.io/vips"
	// AllocatorLeaseName is the Lease the allocator replicas elect a
	// leader with, in the vipctl namespace.
	AllocatorLeaseName = "vipctl-allocator"
)

// HeldVIP is one address a node holds, as published in AnnotationNodeVIPs.
type HeldVIP struct {
	// Address is the VIP.
	Address string `json:"address"`
	// Instance is the key of the VRRP instance carrying it (InstanceKey),
	// empty when the address is on the interface but in no instance this
	// node renders.
	Instance InstanceKey `json:"instance,omitempty"`
	// Since is when this node was first seen holding it.
	Since time.Time `json:"since"`
}

// HeldVIPs is the value of AnnotationNodeVIPs, sorted by address.
type HeldVIPs []HeldVIP

// ParseHeldVIPs decodes an AnnotationNodeVIPs value; empty means none.
func ParseHeldVIPs(s string) (HeldVIPs, error) {
	if s == "" {
		return nil, nil
	}
	var out HeldVIPs
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationNodeVIPs, err)
	}
	return out, nil
}

// String encodes the annotation value.
func (h HeldVIPs) String() string {
	if len(h) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(h)
	return string(b)
}
