package onnode

import (
	"fmt"
	"net/netip"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// What the plan tells a node's data plane to hold (pkg/render computes
// it, pkg/dataplane and pkg/frr act on it).

// Handover is what one node needs to make a planned handover hitless
// (pkg/runtimecfg does the networking): which VRRP instance each of its
// VIPs belongs to, and which peers may hand it an instance by draining.
//
// A node takes a VIP over from a live master in two planned ways: the
// master drains (its adverts then carry priority 1, see drainRef), or this
// node returns with a higher priority and preempts it. Either way the
// master advertised less than this node's priority just before, which a
// master that fails never does (it was the highest). The node taking
// over then sends segments of connections the old master accepted on to
// it instead of resetting them. A peer's address is what its adverts come
// from: its unicast source, which is also its address in the instance's
// machine network in multicast mode.
type Handover struct {
	// Interface is this node's VRRP interface.
	Interface string
	// Instances lists this node's instances that have at least one peer.
	Instances []HandoverInstance
	// SidecarRanges are the ranges of the pools whose Service addresses
	// the sidecar adds (announce: sidecar): a host address in them on the
	// interface that no held anchor calls for is the sidecar's to remove
	// (its Service went while the sidecar was not running), unless it is
	// an anchor.
	SidecarRanges []v1alpha1.AddressRange
	// Keepalived are the addresses in SidecarRanges that keepalived adds
	// itself on this node: those of the pools' externalTrafficPolicy
	// Local Services, each in an instance of its own. The sidecar leaves
	// them alone.
	Keepalived []netip.Addr
}

// HandoverInstance is one VRRP instance as seen by a node.
type HandoverInstance struct {
	// Name is keepalived's name of the instance (api_v4).
	Name   string
	Family int // 4 or 6
	VRID   uint8
	// StepsDown says the instance has an UnheardFile on this node.
	StepsDown bool
	// Priority is this node's priority in the instance, undrained: a
	// master advertising less is one this node takes the VIP from (a
	// drained node, or one this node preempts on its return).
	Priority int
	// VIPs are every address the instance holds: advertised and excluded
	// (a pool's Service addresses).
	VIPs []netip.Addr
	// Peers are the other members' addresses, sorted.
	Peers []netip.Addr
	// Anchors and Sidecar are set for a pool with announce: sidecar:
	// while an anchor (the address keepalived moves, the only one in the
	// instance's adverts) is on the interface, the sidecar puts the
	// Service addresses in Sidecar there too, and takes them off when it
	// leaves. Both are also in VIPs. Sidecar may be empty (no Service yet).
	Anchors []netip.Addr
	Sidecar []netip.Addr
}

// InternalGuard is what a control-plane node (and the bootstrap host)
// refuses to all but the cluster's own hosts (pkg/dataplane writes it):
// the internal API's ports on every address, and every port of
// api-int's own VIPs. The machine config server hands each node its
// Ignition, with the cluster's secrets, on those ports; it must answer
// the nodes and nothing else on the LAN.
type InternalGuard struct {
	// Ports are closed on every address of the node (the VIPs', the
	// node's own) to sources outside Allowed.
	Ports []uint16
	// VIPs are api-int's own VIPs: every TCP port closed to sources
	// outside Allowed.
	VIPs []netip.Addr
	// Allowed are the sources let through: spec.api.internalAllowedSources
	// (default the machine networks), every node's own addresses and the
	// bootstrap host's, sorted, overlaps kept (the writer merges them).
	Allowed []netip.Prefix
}

// MissingInterface is a node left out of the VRRP instances of a pool or
// an IngressController whose VIPs live on an interface of their own
// (interface, interfaceLabel) that the node lacks. `render --nodes`
// refuses it; the sidecar reports its own node's and renders the rest.
type MissingInterface struct {
	Node string
	// Owner is "service pool NAME" or "ingress NAME".
	Owner string
	// Why says what the node lacks: the interface, or the label naming it.
	Why string
}

func (m MissingInterface) String() string {
	return fmt.Sprintf("%s: node %s holds none of its VIPs: %s", m.Owner, m.Node, m.Why)
}

// Announced is what one node announces for one bgp pool.
type Announced struct {
	Pool  string
	Addrs []netip.Addr
	// Backup are addresses announced with a longer AS path
	// (backupPrepend): the routers use them only while no node announces
	// them plainly. A node announces so the Local Services whose only
	// endpoints here are terminating but still serve (a rollout's old
	// pod in its preStop), so that the route stays until the new pod's
	// node announces it.
	Backup []netip.Addr
}

// PortRedirect sends TCP connections to VIP:From on to local port To: a
// control-plane node's API redirect to haproxy (pkg/render computes
// them, pkg/dataplane writes them).
type PortRedirect struct {
	VIP      netip.Addr
	From, To uint16
}
