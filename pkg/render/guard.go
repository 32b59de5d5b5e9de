package render

import (
	"net/netip"
	"slices"
)

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

// InternalGuard returns the guard of the cluster's control-plane nodes;
// ok is false when the config serves no internal API (no internalPort,
// no internalVIPs) and nothing is guarded.
func (p *Plan) InternalGuard() (g InternalGuard, ok bool) {
	api := &p.c.Spec.API
	if !api.GuardsInternal() {
		return InternalGuard{}, false
	}
	for _, port := range api.InternalPorts() {
		g.Ports = append(g.Ports, uint16(port))
	}
	for _, v := range api.InternalVIPs {
		g.VIPs = append(g.VIPs, netip.MustParseAddr(v))
	}
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
