package render

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// backupPrepend is how many times a backup route repeats the nodes' ASN
// before the one every route carries: a path four ASNs long loses to the
// plain one, and is no equal-cost partner of it.
const backupPrepend = 3

// HasBGP tells whether the nodes run BGP: with spec.bgp set every node
// gets a frr.conf, its sessions up even before any pool is bgp, so that a
// pool moved to bgp is announced at once (a reload adds its networks)
// rather than after the sessions come up.
func (p *Plan) HasBGP() bool { return p.c.Spec.BGP != nil }

// runsFRR tells whether node gets a frr.conf: every node with spec.bgp,
// and the bootstrap host when it holds a routed API VIP (it announces
// that alone: Announced gives it no pool).
func (p *Plan) runsFRR(node string) bool {
	return p.HasBGP() && (!p.isBootstrap(node) || p.c.Spec.API.Routed)
}

// Announced lists, per bgp pool, the Service addresses node announces:
// with policy Cluster every address of a pool whose nodeSelector the node
// matches (so the routers spread the traffic over all of them, ECMP);
// with policy Local only those of Services with a ready endpoint here,
// since kube-proxy drops Local traffic on a node without one, and as
// Backup those whose endpoints here are only draining, not at all those
// the node's service proxy does not deliver yet (WithProxyPending); on a
// drained node (WithDrained), and on one held back (WithHeldBack: just
// booted, not synced with the cluster yet, its service proxy maybe not
// either), every one of them as Backup, so that the routers keep sending
// to the nodes that serve.
func (p *Plan) Announced(node string) []onnode.Announced {
	n := p.nodes[node]
	if n == nil || !p.HasBGP() || p.isBootstrap(node) {
		return nil
	}
	var out []onnode.Announced
	for _, pool := range p.model.Pools {
		if !pool.IsBGP() || !cluster.Matches(pool.NodeSelector, n.Labels) {
			continue
		}
		a := onnode.Announced{Pool: pool.Name, Addrs: append([]netip.Addr{}, p.state.ServiceVIPs[pool.Name]...)}
		var pending map[string]bool
		if node == p.proxyNode {
			pending = p.proxyPending
		}
		for _, ls := range p.state.LocalServices {
			if ls.Pool != pool.Name {
				continue
			}
			switch {
			case pending[ls.Name]:
				// Not even as a backup: the routers would spread the
				// traffic over it and a draining node that still serves.
			case slices.Contains(ls.Nodes, node):
				a.Addrs = append(a.Addrs, ls.VIPs...)
			case slices.Contains(ls.Draining, node):
				a.Backup = append(a.Backup, ls.VIPs...)
			}
		}
		if node == p.drained || node == p.heldBack {
			a.Addrs, a.Backup = nil, append(a.Addrs, a.Backup...)
		}
		sort.Slice(a.Addrs, func(i, j int) bool { return a.Addrs[i].Less(a.Addrs[j]) })
		sort.Slice(a.Backup, func(i, j int) bool { return a.Backup[i].Less(a.Backup[j]) })
		out = append(out, a)
	}
	return out
}

// frrView computes node's frr.conf view. A node that peers with no router
// still gets a valid file (bgpd with no neighbor announces nothing).
func (p *Plan) frrView(node string) *frr.Config {
	b := p.c.Spec.BGP
	n := p.nodes[node]
	v := &frr.Config{Node: node, ASN: b.ASN, RestartTime: b.RestartTime()}
	v.RouterID = routerID(node, n.Addresses)
	fams := map[bool]*frr.Family{true: {Name: "ipv4"}, false: {Name: "ipv6"}}
	for _, peer := range p.model.BGPPeers {
		if !cluster.Matches(peer.NodeSelector, n.Labels) {
			continue
		}
		hold, keep := peer.Timers()
		if peer.Unnumbered() && slices.ContainsFunc(v.Peers, func(q frr.Peer) bool { return q.Interface && q.Address == peer.Interface }) {
			continue // one router at a link's far end: the first peer that selects the node
		}
		v.Peers = append(v.Peers, frr.Peer{Address: peer.Name(), Interface: peer.Unnumbered(), IPv6: !peer.Addr.Is4(), DualStack: peer.DualStack, ASN: peer.ASN, Hold: hold, Keepalive: keep, BFD: peer.BFD,
			Password: p.state.BGPPasswords[peer.PasswordSecret], Multihop: peer.EBGPMultihop, IBGP: peer.ASN == b.ASN,
			GracefulRestart: peer.GracefulRestart})
		v.Multihop = v.Multihop || peer.EBGPMultihop > 0
		v.GracefulRestart = v.GracefulRestart || peer.GracefulRestart
	}
	for _, an := range p.Announced(node) {
		plain, backup := p.routes(an)
		for _, r := range slices.Concat(plain, backup) {
			fams[r.Addr().Is4()].Networks = append(fams[r.Addr().Is4()].Networks, r.String())
		}
		for _, r := range backup {
			if r.Addr().Is4() {
				v.Backup4 = append(v.Backup4, r.String())
			} else {
				v.Backup6 = append(v.Backup6, r.String())
			}
		}
	}
	p.routedVIPs(node, v, fams)
	filters := p.peerFilters(v.Peers)
	for _, peer := range v.Peers {
		for _, v4 := range peerFamilies(peer) {
			fp := frr.FamilyPeer{Address: peer.Address, RouteMap: outMap, Filter: filters[peerFamily{peer.Address, v4}].Name}
			if peer.IBGP {
				fp.RouteMap = outMapIBGP
			}
			fams[v4].Peers = append(fams[v4].Peers, fp)
		}
	}
	v.PrefixLists, v.RouteMaps = p.outboundPolicy(v, filters)
	for _, v4 := range []bool{true, false} {
		if f := fams[v4]; len(f.Peers) > 0 {
			v.Families = append(v.Families, *f)
		}
	}
	return v
}

// routes are the prefixes of an's addresses, plain and backup: a host
// route each, or where the pool aggregates (bgp.aggregationLength) the
// aggregate around each address of a Cluster-policy Service. A Local
// Service's address keeps its host route, so that the routers' longest
// match sends its traffic only to the nodes that announce it. An
// aggregate announced plainly for one address is no backup for another.
func (p *Plan) routes(an onnode.Announced) (plain, backup []netip.Prefix) {
	route := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
	if pool := p.model.Pool(an.Pool); pool != nil && pool.BGP != nil && (pool.BGP.AggregationLength > 0 || pool.BGP.AggregationLengthV6 > 0) {
		clusterVIP := make(map[netip.Addr]bool, len(p.state.ServiceVIPs[an.Pool]))
		for _, a := range p.state.ServiceVIPs[an.Pool] {
			clusterVIP[a] = true
		}
		route = func(a netip.Addr) netip.Prefix {
			n := a.BitLen()
			if l := pool.BGP.AggregationLength; clusterVIP[a] && a.Is4() && l > 0 {
				n = int(l)
			} else if l := pool.BGP.AggregationLengthV6; clusterVIP[a] && !a.Is4() && l > 0 {
				n = int(l)
			}
			return netip.PrefixFrom(a, n).Masked()
		}
	}
	// A set, not a scan of the list: a pool of thousands of addresses is
	// rendered on every sync.
	seen := make(map[netip.Prefix]bool, len(an.Addrs)+len(an.Backup))
	for _, a := range an.Addrs {
		if r := route(a); !seen[r] {
			seen[r] = true
			plain = append(plain, r)
		}
	}
	for _, a := range an.Backup {
		if r := route(a); !seen[r] {
			seen[r] = true
			backup = append(backup, r)
		}
	}
	return plain, backup
}

// routerID is a node's BGP router-id: its first IPv4 address, or on a
// node without one (IPv6-only) the low 32 bits of its first IPv6
// address, since bgpd finds no router-id of its own there and its
// sessions never come up. Nodes of one subnet differ in those bits; an
// address whose low bits are all zero falls back to a hash of the node's
// name.
func routerID(node string, addrs []netip.Addr) string {
	for _, a := range addrs {
		if a.Is4() {
			return a.String()
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	b := addrs[0].As16()
	id := [4]byte(b[12:16])
	if id == [4]byte{} {
		h := fnv.New32a()
		_, _ = h.Write([]byte(node))
		binary.BigEndian.PutUint32(id[:], h.Sum32()|1)
	}
	return netip.AddrFrom4(id).String()
}

// peerFamily is one family of a peer's session, keyed by the peer's
// name in frr.conf.
type peerFamily struct {
	peer string
	v4   bool
}

// peerFamilies are the families (IPv4: true) a session carries: its
// address's, or both over an unnumbered or dualStack one.
func peerFamilies(peer frr.Peer) []bool {
	if peer.Interface || peer.DualStack {
		return []bool{true, false}
	}
	return []bool{!peer.IPv6}
}

// routedVIPs adds to v the routed VIPs (spec.api.routed, an
// IngressController's routed) of the instances node is a member of, which frr.conf redistributes while the
// node holds them, and marks their families.
func (p *Plan) routedVIPs(node string, v *frr.Config, fams map[bool]*frr.Family) {
	for _, inst := range p.byNode[node] {
		if !inst.routed {
			continue
		}
		for _, a := range inst.vips {
			pfx := netip.PrefixFrom(a, a.BitLen()).String()
			if a.Is4() {
				v.Held4 = append(v.Held4, pfx)
			} else {
				v.Held6 = append(v.Held6, pfx)
			}
			fams[a.Is4()].Held = true
		}
	}
}
