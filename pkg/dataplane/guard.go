package dataplane

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// The guard's chain and sets in table inet vipctl (RedirectTable).
const (
	guardChain    = "internal-guard"
	guardAllowed4 = "internal-allowed4"
	guardAllowed6 = "internal-allowed6"
)

// addGuard adds the internal API's guard to table (written in the same
// transaction as the redirects): a filter chain on the prerouting hook,
// just before the redirect (dstnat - 10, where kube-proxy filters its
// load balancers' sources too), that refuses with a TCP reset connections
// from outside g.Allowed to g.Ports on any of the node's own addresses
// and to any port of g.VIPs. Before the redirect the packet still names what the client
// asked for (VIP:22623, not haproxy's port), and every packet for a local
// socket passes prerouting: neither the VIP, nor the node's own address,
// nor haproxy's port is a way around it. A reject there needs Linux 5.10
// (RHEL 9, so every OpenShift release vipctl supports). The node's own
// connections (over lo) are let through.
func addGuard(conn *nftables.Conn, table *nftables.Table, g *onnode.InternalGuard) error {
	sets := map[bool]*nftables.Set{}
	for _, v4 := range []bool{true, false} {
		s := &nftables.Set{Table: table, Name: guardAllowed6, KeyType: nftables.TypeIP6Addr, Interval: true}
		if v4 {
			s.Name, s.KeyType = guardAllowed4, nftables.TypeIPAddr
		}
		if err := conn.AddSet(s, intervalElements(g.Allowed, v4)); err != nil {
			return err
		}
		sets[v4] = s
	}
	chain := conn.AddChain(&nftables.Chain{Name: guardChain, Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest - 10)})
	lo := make([]byte, unix.IFNAMSIZ)
	copy(lo, "lo")
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: lo},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	for _, v4 := range []bool{true, false} {
		for _, port := range g.Ports {
			// fib daddr type local: the node's own sockets only. A
			// connection the node forwards (to a pod, a Service
			// behind it, another host) may use these ports as well and
			// is none of the guard's business.
			match := []expr.Any{
				&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
			}
			conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: refuseOutside(sets[v4], v4, match)})
		}
		for _, vip := range g.VIPs {
			if vip.Is4() != v4 {
				continue
			}
			offset := uint32(16)
			if !v4 {
				offset = 24
			}
			match := []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(vip.AsSlice()))},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip.AsSlice()},
			}
			conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: refuseOutside(sets[v4], v4, match)})
		}
	}
	return nil
}

// refuseOutside is `meta nfproto ipvX meta l4proto tcp MATCH ip[6] saddr
// != @allowed reject with tcp reset`.
func refuseOutside(allowed *nftables.Set, v4 bool, match []expr.Any) []expr.Any {
	proto, offset, size := byte(unix.NFPROTO_IPV4), uint32(12), uint32(4)
	if !v4 {
		proto, offset, size = unix.NFPROTO_IPV6, 8, 16
	}
	exprs := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
	exprs = append(exprs, match...)
	return append(exprs,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
		&expr.Lookup{SourceRegister: 1, SetName: allowed.Name, SetID: allowed.ID, Invert: true},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	)
}

// intervalElements are the prefixes of one family as the elements of an
// interval set: each merged range's first address, and the address after
// its last as the interval's end (none when the range runs to the end of
// the address space). The kernel refuses overlapping intervals, so
// overlaps and neighbours are merged first.
func intervalElements(prefixes []netip.Prefix, v4 bool) []nftables.SetElement {
	var spans []v1alpha1.AddressRange
	for _, p := range prefixes {
		if p.Addr().Is4() == v4 {
			spans = append(spans, v1alpha1.PrefixRange(p.Masked()))
		}
	}
	slices.SortFunc(spans, func(a, b v1alpha1.AddressRange) int { return a.First.Compare(b.First) })
	var merged []v1alpha1.AddressRange
	for _, s := range spans {
		if n := len(merged); n > 0 {
			prev := &merged[n-1]
			if next := prev.Last.Next(); !next.IsValid() || s.First.Compare(next) <= 0 {
				if s.Last.Compare(prev.Last) > 0 {
					prev.Last = s.Last
				}
				continue
			}
		}
		merged = append(merged, s)
	}
	var out []nftables.SetElement
	for _, s := range merged {
		out = append(out, nftables.SetElement{Key: s.First.AsSlice()})
		if end := s.Last.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}
