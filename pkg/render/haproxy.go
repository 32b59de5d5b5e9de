package render

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/haproxy"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

const (
	apiBackend = "api"
	// liveBackend only checks the kube-apiservers' liveness; nothing is
	// routed to it.
	liveBackend = "api_live"
)

// The servers' health endpoints: kube-apiserver's readiness and its
// liveness without etcd (what is left when etcd has no leader), and the
// machine config server's only health endpoint (it answers 404 for
// anything but /healthz and /config/).
const (
	apiCheckPath = "/readyz"
	apiLiveCheck = "/livez?exclude=etcd"
	mcsCheckPath = "/healthz"
)

// haproxyConfig balances the API (and api-int's port when configured) over
// every control-plane node, on the bootstrap host over the bootstrap
// machine's servers first. haproxy listens on its own port because
// kube-apiserver already holds the API port on all addresses; traffic for
// VIP:port is redirected to it on the holder.
func (p *Plan) haproxyConfig(node string) (*haproxy.Config, error) {
	s := &p.c.Spec
	var masters []*cluster.Node
	for i := range p.state.Nodes {
		if p.state.Nodes[i].ControlPlane {
			masters = append(masters, &p.state.Nodes[i])
		}
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("no control-plane node in the node list: haproxy would have no backend")
	}
	masters = serving(masters, p.state.APIServers)
	if p.isBootstrap(node) {
		// A control-plane node's host as the bootstrap machine (the
		// in-place bootstrap of the agent-based installer, or the
		// cut-over's --bootstrap-address) answers at one address: one
		// server, the bootstrap machine's, not a second under the node's
		// name.
		boot := p.bootstrapServers()
		masters = slices.DeleteFunc(masters, func(m *cluster.Node) bool {
			return slices.ContainsFunc(m.Addresses, func(a netip.Addr) bool { return slices.Contains(boot.Addresses, a) })
		})
		masters = append([]*cluster.Node{boot}, masters...)
	}
	primary := p.model.API[0]
	families := apiFamilies(p.model.API)
	v := &haproxy.Config{Node: node, Cluster: p.c.Metadata.Name, StatsSocket: p.root + onnode.HaproxyStatsSocket, StatsPort: onnode.HaproxyStatsPort, APIBackend: apiBackend, LiveBackend: liveBackend}
	// keepalived's check script asks 127.0.0.1, so the health frontend
	// listens on IPv4 even in an IPv6-only cluster (loopback always has it).
	v.HealthBinds = binds(withIPv4(families), s.API.HealthPort)

	type fe struct {
		name           string
		listen, target int32
		check, live    string
	}
	fes := []fe{{apiBackend, s.API.LoadBalancerPort, s.API.Port, apiCheckPath, apiLiveCheck}}
	if s.API.InternalPort != 0 {
		fes = append(fes, fe{"api_int", s.API.InternalLoadBalancerPort, s.API.InternalPort, mcsCheckPath, ""})
	}
	for _, f := range fes {
		fv := haproxy.Frontend{Name: f.name, Binds: binds(families, f.listen), Check: f.check, Live: f.live}
		for _, m := range masters {
			addr, ok := firstOfFamily(m.Addresses, primary.Is4())
			if !ok {
				return nil, fmt.Errorf("control-plane node %s has no %s address for the API backend", m.Name, familyLabel(primary))
			}
			fv.Servers = append(fv.Servers, haproxy.Server{Name: m.Name, Address: netip.AddrPortFrom(addr, uint16(f.target)).String()})
		}
		v.Frontends = append(v.Frontends, fv)
	}
	for _, sv := range v.Frontends[0].Servers {
		v.APIServers = append(v.APIServers, sv.Name)
	}
	v.Quorum = apiQuorum(len(masters), p.isBootstrap(node))
	return v, nil
}

// apiQuorum is how many kube-apiservers must be alive for a node's
// haproxy to count as serving while none is ready: a majority of its
// servers. All of them unready but alive is etcd electing a leader, the
// same everywhere, and the VIP stays where it is (the live ones are
// haproxy's backups). Unready with most of them unreachable is this node
// cut off: its own apiserver is the only one alive, and it cannot answer
// without etcd's quorum. Keeping the VIP there would make the node take
// it back the moment it returns, before its haproxy sees the ready
// apiservers again, failing requests on its own unready one; instead its
// keepalived goes to FAULT while cut off and preempts only once haproxy
// serves again. The bootstrap host's haproxy serves with any one alive:
// its own apiserver is the cluster's only one early on.
func apiQuorum(servers int, bootstrap bool) int {
	if bootstrap {
		return 1
	}
	return servers/2 + 1
}

// bootstrapServers is the bootstrap machine as a backend of the bootstrap
// host's haproxy: where its kube-apiserver and machine config server
// answer, the bootstrap host itself unless `vipctl bootstrap` was told
// otherwise.
func (p *Plan) bootstrapServers() *cluster.Node {
	if st := p.state.Bootstrap; st != nil && len(st.Servers) > 0 {
		return &cluster.Node{Name: BootstrapNode, Addresses: st.Servers}
	}
	return p.bootstrap
}

// serving keeps the control-plane nodes with an address among the API
// endpoints, or all of them when none matches: a backend list must never be
// empty, and haproxy's checks still route around a dead apiserver.
func serving(masters []*cluster.Node, endpoints []netip.Addr) []*cluster.Node {
	up := make(map[netip.Addr]bool, len(endpoints))
	for _, a := range endpoints {
		up[a.Unmap()] = true
	}
	var out []*cluster.Node
	for _, m := range masters {
		for _, a := range m.Addresses {
			if up[a] {
				out = append(out, m)
				break
			}
		}
	}
	if len(out) == 0 {
		return masters
	}
	return out
}

func apiFamilies(vips []netip.Addr) []int {
	var fams []int
	for _, a := range vips {
		if a.Is4() {
			fams = append(fams, 4)
		} else {
			fams = append(fams, 6)
		}
	}
	return fams
}

// binds listens per family present rather than on a dual-stack socket, so
// haproxy also starts where IPv6 is disabled.
func binds(families []int, port int32) []string {
	var out []string
	for _, f := range families {
		if f == 4 {
			out = append(out, fmt.Sprintf("0.0.0.0:%d", port))
		} else {
			out = append(out, fmt.Sprintf(":::%d v6only", port))
		}
	}
	return out
}

func withIPv4(families []int) []int {
	for _, f := range families {
		if f == 4 {
			return families
		}
	}
	return append([]int{4}, families...)
}

func firstOfFamily(addrs []netip.Addr, v4 bool) (netip.Addr, bool) {
	for _, a := range addrs {
		if a.Is4() == v4 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func familyLabel(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// HasAPI tells whether vipctl carries the API VIP, and so runs haproxy on
// the control-plane nodes: not in mode poolsOnly, where OpenShift's own
// keepalived and haproxy do.
func (p *Plan) HasAPI() bool { return !p.c.PoolsOnly() }

// IsControlPlane tells whether the named node is a control-plane node,
// which runs haproxy when HasAPI.
func (p *Plan) IsControlPlane(node string) bool {
	n, ok := p.nodes[node]
	return ok && n.ControlPlane
}
