package render

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/frr"
)

// The outbound route-maps: outMap for eBGP peers, outMapIBGP for peers
// in the nodes' own AS, which drop a route whose AS path holds their AS
// (FRR 8.4 as a route reflector did, in the lab): a backup route goes to
// them at backupLocalPref instead of with a longer path, and a pool's
// asPathPrepend never reaches them (validation refuses it with one).
const (
	outMap     = "vipctl-out"
	outMapIBGP = "vipctl-out-ibgp"
	// backupLocalPref is an iBGP backup route's LOCAL_PREF: below every
	// plain route's (a pool's localPref is at least 1).
	backupLocalPref = 0
)

// The route-map sequences: 5 and 6 match the backup routes (IPv4, IPv6),
// 10 every route. With a pool policy those jump (on-match goto) to
// policySeq, where each pool with one takes two (IPv4, IPv6); iBGP's
// backups then come after the policies, at policyBackupSeq, so that their
// local preference is the last word; policyFinalSeq permits what no
// entry after the jump matched.
const (
	policySeq       = 100
	policyBackupSeq = 60000
	policyFinalSeq  = 65000
)

// frr.PrefixList is one prefix-list: its lines after "seq N".

// poolPolicy is one bgp pool's policy as route-map entries need it.
type poolPolicy struct {
	pool             string
	list4, list6     string
	prepend          string
	sets             []string // communities, large communities, local-pref
	prefix4, prefix6 []string
}

// outboundPolicy builds the prefix-lists and the route-maps of v's node:
// outMap always (frr.conf has always had it), outMapIBGP when a peer is
// iBGP.
func (p *Plan) outboundPolicy(v *frr.Config, filters map[peerFamily]frr.PrefixList) ([]frr.PrefixList, []frr.RouteMap) {
	pols := p.poolPolicies()
	var lists []frr.PrefixList
	for _, pol := range pols {
		if len(pol.prefix4) > 0 {
			lists = append(lists, frr.PrefixList{Family: "ip", Name: pol.list4, Lines: prefixLines("permit", pol.prefix4, "32")})
		}
		if len(pol.prefix6) > 0 {
			lists = append(lists, frr.PrefixList{Family: "ipv6", Name: pol.list6, Lines: prefixLines("permit", pol.prefix6, "128")})
		}
	}
	for _, peer := range v.Peers {
		for _, is4 := range peerFamilies(peer) {
			if f, ok := filters[peerFamily{peer.Address, is4}]; ok {
				lists = append(lists, f)
			}
		}
	}
	maps := []frr.RouteMap{p.outRouteMap(pols, false)}
	if slices.ContainsFunc(v.Peers, func(pv frr.Peer) bool { return pv.IBGP }) {
		maps = append(maps, p.outRouteMap(pols, true))
	}
	return lists, maps
}

// prefixLines are a prefix-list's lines for prefixes and what they hold
// down to host routes (le max).
func prefixLines(action string, prefixes []string, max string) []string {
	out := make([]string, 0, len(prefixes))
	for _, pr := range prefixes {
		out = append(out, action+" "+pr+" le "+max)
	}
	return out
}

// outRouteMap is outMap (ibgp false) or outMapIBGP.
func (p *Plan) outRouteMap(pols []poolPolicy, ibgp bool) frr.RouteMap {
	b := p.c.Spec.BGP
	var community []string
	if len(b.Communities) > 0 {
		community = []string{"community " + strings.Join(b.Communities, " ") + " additive"}
	}
	backupSet := "as-path prepend " + strings.TrimSpace(strings.Repeat(strconv.FormatUint(uint64(b.ASN), 10)+" ", backupPrepend))
	name := outMap
	if ibgp {
		name, backupSet = outMapIBGP, "local-preference "+strconv.Itoa(backupLocalPref)
	}
	backups := func(seq int, sets []string) []frr.RouteMapEntry {
		return []frr.RouteMapEntry{
			{Seq: seq, Match: "ip address prefix-list vipctl-backup4", Sets: sets},
			{Seq: seq + 1, Match: "ipv6 address prefix-list vipctl-backup6", Sets: sets},
		}
	}
	m := frr.RouteMap{Name: name}
	if len(pols) == 0 {
		m.Entries = append(backups(5, slices.Concat([]string{backupSet}, community)), frr.RouteMapEntry{Seq: 10, Sets: community})
		return m
	}
	if !ibgp {
		m.Entries = backups(5, slices.Concat([]string{backupSet}, community))
		m.Entries[0].Goto, m.Entries[1].Goto = policySeq, policySeq
	}
	m.Entries = append(m.Entries, frr.RouteMapEntry{Seq: 10, Sets: community, Goto: policySeq})
	for i, pol := range pols {
		sets := pol.sets
		next := 0
		if ibgp {
			next = policyBackupSeq
		} else if pol.prepend != "" {
			sets = slices.Concat([]string{"as-path prepend " + pol.prepend}, sets)
		}
		if len(pol.prefix4) > 0 {
			m.Entries = append(m.Entries, frr.RouteMapEntry{Seq: policySeq + 2*i, Match: "ip address prefix-list " + pol.list4, Sets: sets, Goto: next})
		}
		if len(pol.prefix6) > 0 {
			m.Entries = append(m.Entries, frr.RouteMapEntry{Seq: policySeq + 2*i + 1, Match: "ipv6 address prefix-list " + pol.list6, Sets: sets, Goto: next})
		}
	}
	if ibgp {
		m.Entries = append(m.Entries, backups(policyBackupSeq, []string{backupSet})...)
	}
	m.Entries = append(m.Entries, frr.RouteMapEntry{Seq: policyFinalSeq})
	return m
}

// poolPolicies are the bgp pools whose bgp sets something on their
// routes, in spec order.
func (p *Plan) poolPolicies() []poolPolicy {
	var out []poolPolicy
	asn := strconv.FormatUint(uint64(p.c.Spec.BGP.ASN), 10)
	for _, pool := range p.model.Pools {
		pb := pool.BGP
		if !pool.IsBGP() || pb == nil || len(pb.Communities)+len(pb.LargeCommunities)+int(pb.ASPathPrepend) == 0 && pb.LocalPref == nil {
			continue
		}
		pol := poolPolicy{pool: pool.Name, list4: "vipctl-pool-" + pool.Name + "-4", list6: "vipctl-pool-" + pool.Name + "-6",
			prepend: strings.TrimSpace(strings.Repeat(asn+" ", int(pb.ASPathPrepend)))}
		if len(pb.Communities) > 0 {
			pol.sets = append(pol.sets, "community "+strings.Join(pb.Communities, " ")+" additive")
		}
		if len(pb.LargeCommunities) > 0 {
			pol.sets = append(pol.sets, "large-community "+strings.Join(pb.LargeCommunities, " ")+" additive")
		}
		if pb.LocalPref != nil {
			pol.sets = append(pol.sets, "local-preference "+strconv.FormatUint(uint64(*pb.LocalPref), 10))
		}
		pol.prefix4, pol.prefix6 = poolPrefixes(pool.Ranges)
		out = append(out, pol)
	}
	return out
}

// peerFilters are the outbound prefix-lists, by peer address, of the
// node's peers that some bgp pool's bgp.peers leaves out: each denies
// those pools' ranges and permits the rest.
func (p *Plan) peerFilters(peers []frr.Peer) map[peerFamily]frr.PrefixList {
	out := map[peerFamily]frr.PrefixList{}
	for _, peer := range peers {
		name := "vipctl-to-if-" + peer.Address
		if !peer.Interface {
			name = "vipctl-to-" + strings.ReplaceAll(peer.Address, ":", "-")
		}
		for _, is4 := range peerFamilies(peer) {
			var deny []string
			for _, pool := range p.model.Pools {
				if !pool.IsBGP() || pool.BGP == nil || len(pool.BGP.Peers) == 0 || slices.ContainsFunc(pool.BGP.Peers, peerNamed(peer)) {
					continue
				}
				v4, v6 := poolPrefixes(pool.Ranges)
				deny = append(deny, map[bool][]string{true: v4, false: v6}[is4]...)
			}
			if len(deny) == 0 {
				continue
			}
			fam, any, max := "ip", "0.0.0.0/0", "32"
			if !is4 {
				fam, any, max = "ipv6", "::/0", "128"
			}
			out[peerFamily{peer.Address, is4}] = frr.PrefixList{Family: fam, Name: name,
				Lines: append(prefixLines("deny", deny, max), "permit "+any+" le "+max)}
		}
	}
	return out
}

// peerNamed tells whether a pool's bgp.peers entry names peer, as
// v1alpha1.BGPPeer.Is does.
func peerNamed(peer frr.Peer) func(string) bool {
	if peer.Interface {
		return v1alpha1.BGPPeer{Interface: peer.Address}.Is
	}
	return v1alpha1.BGPPeer{Address: peer.Address}.Is
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
