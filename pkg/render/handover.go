package render

import (
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

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

// Handover returns node's handover data. It never fails for a node that
// NodeFiles accepts.
func (p *Plan) Handover(node string) (Handover, error) {
	n, ok := p.nodes[node]
	if !ok {
		return Handover{}, p.notListed(node)
	}
	h := Handover{Interface: n.Interface}
	if h.Interface == "" {
		h.Interface = p.c.Spec.VRRP.Interface
	}
	for _, inst := range p.byNode[node] {
		if inst.on.Own() {
			// Its VIPs live on another interface, where the handover
			// tables, takeover routes and local VIPs do not look: a
			// planned move still goes make-before-break (the drain), but
			// connections the old holder accepted are reset.
			continue
		}
		hi := HandoverInstance{Name: instanceName(inst.key, inst.family), Family: inst.family, VRID: inst.vrid}
		self, peers := inst.membersOf(node)
		hi.Priority, hi.Peers, hi.StepsDown = self.priority, peers, stepsDown(inst, peers)
		if len(hi.Peers) == 0 {
			continue
		}
		slices.SortFunc(hi.Peers, netip.Addr.Compare)
		hi.VIPs = append(append(hi.VIPs, inst.vips...), inst.excluded...)
		slices.SortFunc(hi.VIPs, netip.Addr.Compare)
		if inst.sidecar {
			hi.Anchors = append(hi.Anchors, inst.vips...)
			hi.Sidecar = append(hi.Sidecar, inst.excluded...)
			for _, r := range inst.ranges {
				if !slices.Contains(h.SidecarRanges, r) {
					h.SidecarRanges = append(h.SidecarRanges, r)
				}
			}
		}
		h.Instances = append(h.Instances, hi)
	}
	for _, inst := range p.byNode[node] {
		if inst.sidecar || inst.on.Own() {
			continue
		}
		for _, a := range inst.vips {
			if slices.ContainsFunc(h.SidecarRanges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) }) {
				h.Keepalived = append(h.Keepalived, a)
			}
		}
	}
	slices.SortFunc(h.Keepalived, netip.Addr.Compare)
	return h, nil
}
