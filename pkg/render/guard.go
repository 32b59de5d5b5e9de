package render

import (
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// InternalGuard returns the guard of the cluster's control-plane nodes;
// ok is false when the config serves no internal API (no internalPort,
// no internalVIPs) and nothing is guarded.
func (p *Plan) InternalGuard() (g onnode.InternalGuard, ok bool) {
	api := &p.c.Spec.API
	if !api.GuardsInternal() {
		return onnode.InternalGuard{}, false
	}
	for _, port := range api.InternalPorts() {
		g.Ports = append(g.Ports, uint16(port))
	}
	g.VIPs = append(g.VIPs, p.model.APIInternal...)
	g.Allowed = p.c.AllowedInternalSources()
	hosts := make([][]netip.Addr, 0, len(p.state.Nodes)+1)
	for i := range p.state.Nodes {
		hosts = append(hosts, p.state.Nodes[i].Addresses)
	}
	if p.bootstrap != nil {
		hosts = append(hosts, p.bootstrap.Addresses)
	}
	for _, addrs := range hosts {
		for _, a := range addrs {
			g.Allowed = append(g.Allowed, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	slices.SortFunc(g.Allowed, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	g.Allowed = slices.Compact(g.Allowed)
	return g, true
}
