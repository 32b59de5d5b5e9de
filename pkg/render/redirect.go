package render

import (
	"slices"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// APIRedirects lists the redirects of a control-plane node: kube-apiserver
// holds the API port on every address, so connections to the API VIP's
// port must be turned to haproxy's port, or the holder's own apiserver
// would answer alone (and a dead one would fail the VIP). The same for
// api-int's port when haproxy fronts it; api-int's own VIPs serve both
// as well.
func APIRedirects(m *cluster.Model) []onnode.PortRedirect {
	api := &m.Config.Spec.API
	var out []onnode.PortRedirect
	for _, vip := range slices.Concat(m.API, m.APIInternal) {
		out = append(out, onnode.PortRedirect{VIP: vip, From: uint16(api.Port), To: uint16(api.LoadBalancerPort)})
		if api.InternalPort != 0 {
			out = append(out, onnode.PortRedirect{VIP: vip, From: uint16(api.InternalPort), To: uint16(api.InternalLoadBalancerPort)})
		}
	}
	return out
}

// Redirects are node's API redirects: APIRedirects where haproxy runs (a
// control-plane node, the bootstrap host), none elsewhere.
func (p *Plan) Redirects(node string) []onnode.PortRedirect {
	if !p.HasAPI() || !p.IsControlPlane(node) {
		return nil
	}
	return APIRedirects(p.model)
}
