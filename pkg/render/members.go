package render

import "github.com/vipctl/vipctl/pkg/vrid"

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
