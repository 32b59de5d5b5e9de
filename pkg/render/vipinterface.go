package render

import (
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// MissingInterfaces lists the nodes left out for lack of an own
// interface, in the order they were found.
func (p *Plan) MissingInterfaces() []onnode.MissingInterface {
	return append([]onnode.MissingInterface(nil), p.missing...)
}

// vrrpNetwork is the machine network VRRP speaks in for a VIP: the VIP's
// own, or, for VIPs on an interface of their own (outside every machine
// network, as a rule), the first machine network of the VIP's family:
// the nodes' adverts stay on the VRRP interface.
func (p *Plan) vrrpNetwork(vip netip.Addr, on v1alpha1.VIPInterface) (netip.Prefix, bool) {
	if !on.Own() {
		return p.machineNetwork(vip)
	}
	for _, n := range p.model.MachineNetworks {
		if n.Addr().Is4() == vip.Is4() {
			return n, true
		}
	}
	return netip.Prefix{}, false
}

// hasVIPInterface tells whether node can hold s's VIPs: it has their
// interface (or the label naming it), as far as anyone knows. A node
// that cannot is noted once per owner.
func (p *Plan) hasVIPInterface(node *cluster.Node, s instanceSpec) bool {
	if !s.on.Own() {
		return true
	}
	iface, why := s.on.On(node.Labels)
	if why == "" && node.Interfaces != nil && !slices.Contains(node.Interfaces, iface) {
		why = "it has no interface " + iface
	}
	if why == "" {
		return true
	}
	m := onnode.MissingInterface{Node: node.Name, Owner: s.owner, Why: why}
	if !slices.Contains(p.missing, m) {
		p.missing = append(p.missing, m)
	}
	return false
}
