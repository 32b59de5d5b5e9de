package render

import (
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Handover returns node's handover data. It never fails for a node that
// NodeFiles accepts.
func (p *Plan) Handover(node string) (onnode.Handover, error) {
	n, ok := p.nodes[node]
	if !ok {
		return onnode.Handover{}, p.notListed(node)
	}
	h := onnode.Handover{Interface: n.Interface}
	if h.Interface == "" {
		h.Interface = p.c.Spec.VRRP.Interface
	}
	for _, inst := range p.byNode[node] {
		if inst.on.Own() || inst.routed {
			// Its VIPs live on another interface, where the handover
			// tables, takeover routes and local VIPs do not look, or are
			// routed to their holder across racks, where no segment
			// carries the old holder's packets or the wire's questions:
			// a planned move still goes make-before-break (the drain),
			// but connections the old holder accepted are reset.
			continue
		}
		hi := onnode.HandoverInstance{Name: instanceName(inst.key, inst.family), Family: inst.family, VRID: inst.vrid}
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
		if inst.sidecar || inst.on.Own() || inst.routed {
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
