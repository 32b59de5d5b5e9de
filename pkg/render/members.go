package render

import (
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/vrid"
)

// VRRPMembers are the cluster's own VRRP routers by ID: every member of
// every instance, the bootstrap host's too, from the address its adverts
// come from (see Handover). An advert of one of these IDs from another
// address is a router outside the cluster (the sidecar counts it,
// vipctl_vrrp_foreign_adverts_total).
func (p *Plan) VRRPMembers() vrid.Members {
	m := vrid.Members{}
	for _, inst := range p.instances {
		for _, mb := range inst.eligible {
			m.Add(inst.vrid, inst.key.String(), mb.src, inst.vips)
		}
	}
	return m
}

// membersOf is inst as node sees it: node's own member, and its peers'
// addresses in member order, each once and never node's own. The
// bootstrap host in place of a control-plane node (the agent-based
// installer's rendezvous host, which reboots into that node: spec.bootstrap
// names the node's address) is one host under two names: every other node
// lists its address once, whoever speaks from it, and neither of the two
// lists the other (itself).
func (inst *instance) membersOf(node string) (self member, peers []netip.Addr) {
	for _, m := range inst.eligible {
		if m.node.Name == node {
			self = m
		}
	}
	for _, m := range inst.eligible {
		if m.node.Name == node || m.src == self.src || slices.Contains(peers, m.src) {
			continue
		}
		peers = append(peers, m.src)
	}
	return self, peers
}
