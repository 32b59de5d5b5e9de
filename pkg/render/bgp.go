package render

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// Announced is what one node announces for one bgp pool.
type Announced struct {
	Pool  string
	Addrs []netip.Addr
	// Backup are addresses announced with a longer AS path
	// (backupPrepend): the routers use them only while no node announces
	// them plainly. A node announces so the Local Services whose only
	// endpoints here are terminating but still serve (a rollout's old
	// pod in its preStop), so that the route stays until the new pod's
	// node announces it.
	Backup []netip.Addr
}

// backupPrepend is how many times a backup route repeats the nodes' ASN
// before the one every route carries: a path four ASNs long loses to the
// plain one, and is no equal-cost partner of it.
const backupPrepend = 3

// frrView feeds frr.conf.tmpl: one node's BGP sessions and the /32 and
// /128 routes it announces.
type frrView struct {
	Node     string
	ASN      uint32
	RouterID string
	Peers    []frrPeerView
	// Families are ipv4 and/or ipv6, each with its peers and networks;
	// a family without peers is left out.
	Families    []frrFamilyView
	Communities []string
	// BackupPrepend is what backup routes prepend to their AS path;
	// Backup4 and Backup6 are those routes, which frr.conf lists in the
	// prefix-lists vipctl-backup4 and vipctl-backup6 for the outbound
	// route-map to match. A route turning into a backup keeps its
	// network line: frr-reload.py would replace a changed one by
	// withdrawing it first (seen in the cluster lab: ~0.5 s without a
	// route).
	BackupPrepend    string
	Backup4, Backup6 []string
	// Multihop tells whether a peer is hops away: frr.conf then lets
	// next-hop tracking resolve through the default route.
	Multihop bool
	// Policies are the bgp pools' routing policies (spec.servicePools[].bgp)
	// that set something on their routes, in spec order. With any, the
	// outbound route-map's first entries jump to them (on-match goto) and
	// a last, empty entry permits the routes of the other pools.
	Policies []frrPolicyView
	// PolicySeq is the first policy's sequence, where the entries above
	// jump; PolicyFinalSeq the last, empty entry's.
	PolicySeq, PolicyFinalSeq int
	// PeerFilters are the prefix-lists that keep a pool's routes from the
	// peers its bgp.peers leaves out.
	PeerFilters []frrPeerFilter
}

// frrPolicyView is one pool's routing policy in frr.conf: route-map
// entries Seq (IPv4) and Seq+1 (IPv6) match the prefix-lists of its
// address ranges and set what the pool asks.
type frrPolicyView struct {
	Pool             string
	Seq              int
	Prefixes4        []string
	Prefixes6        []string
	Prepend          string
	Communities      []string
	LargeCommunities []string
	LocalPref        *uint32
}

// frrPeerFilter is the outbound prefix-list of one peer: deny the ranges
// of the pools it may not get, permit the rest.
type frrPeerFilter struct {
	Name, Peer string
	IPv6       bool
	Deny       []string
}

// policySeq is the route-map sequence of the first pool's policy; each
// pool takes two (IPv4, IPv6), and policyFinalSeq permits the routes no
// policy matched.
const (
	policySeq      = 100
	policyFinalSeq = 65000
)

type frrPeerView struct {
	Address         string
	ASN             uint32
	Hold, Keepalive int
	BFD             bool
	// Password is the session's TCP MD5 password ("" none, or not read
	// yet: cluster.State.BGPPasswords).
	Password string
	// Multihop is the eBGP session's TTL for a router hops away (0:
	// directly connected).
	Multihop int32
}

// hasPassword tells whether frr.conf holds a password, and so is
// written for root alone.
func (v *frrView) hasPassword() bool {
	return slices.ContainsFunc(v.Peers, func(p frrPeerView) bool { return p.Password != "" })
}

type frrFamilyView struct {
	Name     string // ipv4, ipv6
	Peers    []string
	Networks []string
	// Filters maps a peer to its outbound prefix-list (frrPeerFilter).
	Filters map[string]string
}

// HasBGP tells whether the nodes run BGP: with spec.bgp set every node
// gets a frr.conf, its sessions up even before any pool is bgp, so that a
// pool moved to bgp is announced at once (a reload adds its networks)
// rather than after the sessions come up.
func (p *Plan) HasBGP() bool { return p.c.Spec.BGP != nil }

// Announced lists, per bgp pool, the Service addresses node announces:
// with policy Cluster every address of a pool whose nodeSelector the node
// matches (so the routers spread the traffic over all of them, ECMP);
// with policy Local only those of Services with a ready endpoint here,
// since kube-proxy drops Local traffic on a node without one, and as
// Backup those whose endpoints here are only draining, not at all those
// the node's service proxy does not deliver yet (WithProxyPending); on a
// drained node
// (WithDrained) every one of them as Backup.
func (p *Plan) Announced(node string) []Announced {
	n := p.nodes[node]
	if n == nil || !p.HasBGP() || p.isBootstrap(node) {
		return nil
	}
	var out []Announced
	for _, pool := range p.model.Pools {
		if !pool.IsBGP() || !cluster.Matches(pool.NodeSelector, n.Labels) {
			continue
		}
		a := Announced{Pool: pool.Name, Addrs: append([]netip.Addr{}, p.state.ServiceVIPs[pool.Name]...)}
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
		if node == p.drained {
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
func (p *Plan) frrView(node string) *frrView {
	b := p.c.Spec.BGP
	n := p.nodes[node]
	v := &frrView{Node: node, ASN: b.ASN, Communities: b.Communities,
		PolicySeq: policySeq, PolicyFinalSeq: policyFinalSeq,
		BackupPrepend: strings.TrimSpace(strings.Repeat(strconv.FormatUint(uint64(b.ASN), 10)+" ", backupPrepend))}
	v.RouterID = routerID(node, n.Addresses)
	fams := map[bool]*frrFamilyView{true: {Name: "ipv4"}, false: {Name: "ipv6"}}
	for _, peer := range b.Peers {
		if !cluster.Matches(peer.NodeSelector, n.Labels) {
			continue
		}
		hold, keep := peer.Timers()
		v.Peers = append(v.Peers, frrPeerView{Address: peer.Address, ASN: peer.ASN, Hold: hold, Keepalive: keep, BFD: peer.BFD,
			Password: p.state.BGPPasswords[peer.PasswordSecret], Multihop: peer.EBGPMultihop})
		v.Multihop = v.Multihop || peer.EBGPMultihop > 0
		a := netip.MustParseAddr(peer.Address)
		fams[a.Is4()].Peers = append(fams[a.Is4()].Peers, peer.Address)
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
	v.Policies = p.policies()
	v.PeerFilters = p.peerFilters(v.Peers)
	for _, f := range v.PeerFilters {
		fam := fams[!f.IPv6]
		if fam.Filters == nil {
			fam.Filters = map[string]string{}
		}
		fam.Filters[f.Peer] = f.Name
	}
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
func (p *Plan) routes(an Announced) (plain, backup []netip.Prefix) {
	pool := p.model.Pool(an.Pool)
	cluster := p.state.ServiceVIPs[an.Pool]
	route := func(a netip.Addr) netip.Prefix {
		n := a.BitLen()
		if pool != nil && pool.BGP != nil && slices.Contains(cluster, a) {
			if l := pool.BGP.AggregationLength; a.Is4() && l > 0 {
				n = int(l)
			} else if l := pool.BGP.AggregationLengthV6; !a.Is4() && l > 0 {
				n = int(l)
			}
		}
		return netip.PrefixFrom(a, n).Masked()
	}
	for _, a := range an.Addrs {
		if r := route(a); !slices.Contains(plain, r) {
			plain = append(plain, r)
		}
	}
	for _, a := range an.Backup {
		if r := route(a); !slices.Contains(plain, r) && !slices.Contains(backup, r) {
			backup = append(backup, r)
		}
	}
	return plain, backup
}

// policies are the route-map entries of the bgp pools whose bgp sets
// something on their routes.
func (p *Plan) policies() []frrPolicyView {
	var out []frrPolicyView
	asn := strconv.FormatUint(uint64(p.c.Spec.BGP.ASN), 10)
	for _, pool := range p.model.Pools {
		pb := pool.BGP
		if !pool.IsBGP() || pb == nil || len(pb.Communities)+len(pb.LargeCommunities)+int(pb.ASPathPrepend) == 0 && pb.LocalPref == nil {
			continue
		}
		v := frrPolicyView{Pool: pool.Name, Seq: policySeq + 2*len(out), Communities: pb.Communities,
			LargeCommunities: pb.LargeCommunities, LocalPref: pb.LocalPref,
			Prepend: strings.TrimSpace(strings.Repeat(asn+" ", int(pb.ASPathPrepend)))}
		v.Prefixes4, v.Prefixes6 = poolPrefixes(pool.Ranges)
		out = append(out, v)
	}
	return out
}

// peerFilters are the outbound prefix-lists of the node's peers that some
// bgp pool's bgp.peers leaves out: each denies those pools' ranges.
func (p *Plan) peerFilters(peers []frrPeerView) []frrPeerFilter {
	var out []frrPeerFilter
	for _, peer := range peers {
		addr := netip.MustParseAddr(peer.Address)
		f := frrPeerFilter{Name: "vipctl-to-" + strings.ReplaceAll(addr.String(), ":", "-"), Peer: peer.Address, IPv6: !addr.Is4()}
		for _, pool := range p.model.Pools {
			if !pool.IsBGP() || pool.BGP == nil || len(pool.BGP.Peers) == 0 {
				continue
			}
			if slices.ContainsFunc(pool.BGP.PeerSet(p.c.Spec.BGP), func(q v1alpha1.BGPPeer) bool { return netip.MustParseAddr(q.Address) == addr }) {
				continue
			}
			v4, v6 := poolPrefixes(pool.Ranges)
			if addr.Is4() {
				f.Deny = append(f.Deny, v4...)
			} else {
				f.Deny = append(f.Deny, v6...)
			}
		}
		if len(f.Deny) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// poolPrefixes are the CIDRs of a pool's ranges, per family.
func poolPrefixes(ranges []v1alpha1.AddressRange) (v4, v6 []string) {
	for _, r := range ranges {
		for _, p := range r.Prefixes() {
			if r.Is4() {
				v4 = append(v4, p.String())
			} else {
				v6 = append(v6, p.String())
			}
		}
	}
	return v4, v6
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
