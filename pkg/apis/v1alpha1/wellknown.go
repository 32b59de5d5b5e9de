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
	// AnnotationNodeBGPSessions is written by each node's sidecar on its
	// own Node when it has bgp pools: its bgpd's sessions (JSON, see
	// BGPSessions), rewritten only when one changes state.
	AnnotationNodeBGPSessions = "vipctl.io/bgp-sessions"
	// AnnotationNodeConfig is written by each node's sidecar on its own
	// Node after it applied a config: the SpecDigest of that config's
	// spec and where it read it (AppliedConfig). The ClusterVIPs status
	// writer tells from it which generation of the object each node runs
	// and whether it reads the object yet. Since v0.2.0: older sidecars
	// write none.
	AnnotationNodeConfig = "vipctl.io/config"
	// AnnotationConfigSource ("true") on the ClusterVIPs object makes
	// it, not the vipctl-config ConfigMap, the live config the sidecars
	// and the allocator read (since v0.2.0; `vipctl migrate` sets it).
	// An object without it is only reported on: one applied to try `oc
	// explain` changes nothing on the nodes. On the ConfigMap the same
	// key says "clustervips" while the cluster is migrated, so that its
	// readers look for the object at once.
	AnnotationConfigSource = "vipctl.io/config-source"
	// AllocatorLeaseName is the Lease the allocator replicas elect a
	// leader with, in the vipctl namespace.
	AllocatorLeaseName = "vipctl-allocator"
)

// BGPSession is one of a node's BGP sessions, as published in
// AnnotationNodeBGPSessions.
type BGPSession struct {
	// Peer is the router's address.
	Peer string `json:"peer"`
	// ASN is the router's AS.
	ASN uint32 `json:"asn"`
	// State is bgpd's: Established, or Idle, Connect, Active, OpenSent,
	// OpenConfirm while the session is down; Unknown when bgpd cannot be
	// asked.
	State string `json:"state"`
	// Since is when the session entered State (as bgpd counts it; when
	// the node first saw it in State if bgpd does not say).
	Since time.Time `json:"since"`
	// PrefixesSent are the routes announced to the peer, PrefixesReceived
	// the routes accepted from it.
	PrefixesSent     int `json:"prefixesSent"`
	PrefixesReceived int `json:"prefixesReceived"`
	// Dropped counts how often bgpd saw the session go down.
	Dropped int `json:"dropped"`
	// BFD is the BFD session's status (Up, Down, Unknown); empty without BFD.
	BFD string `json:"bfd,omitempty"`
}

// BGPStateEstablished is bgpd's state of a session that carries routes;
// Idle, Connect, Active, OpenSent and OpenConfirm are its states of one
// that does not.
const BGPStateEstablished = "Established"

// BGPStateUnknown is vipctl's state of a session whose bgpd cannot be
// asked (crashed, hung or not started).
const BGPStateUnknown = "Unknown"

// Established tells whether the session carries routes.
func (s BGPSession) Established() bool { return s.State == BGPStateEstablished }

// BGPSessions is the value of AnnotationNodeBGPSessions, sorted by peer.
type BGPSessions []BGPSession

// ParseBGPSessions decodes an AnnotationNodeBGPSessions value; empty
// means none.
func ParseBGPSessions(s string) (BGPSessions, error) {
	return parseNodeAnnotation[BGPSessions](AnnotationNodeBGPSessions, s)
}

// String encodes the annotation value.
func (b BGPSessions) String() string { return nodeAnnotation(b) }

func parseNodeAnnotation[T any](name, s string) (T, error) {
	var out T
	if s == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return out, fmt.Errorf("annotation %s: %w", name, err)
	}
	return out, nil
}

func nodeAnnotation[T any](list []T) string {
	if len(list) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(list)
	return string(b)
}
