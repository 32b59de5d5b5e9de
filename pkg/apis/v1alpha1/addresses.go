package v1alpha1

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"
)

// AddressRange is an inclusive range of addresses of one family. Pools are
// written as CIDRs or "first-last" ranges; both become an AddressRange so
// that overlap and membership checks have one implementation.
type AddressRange struct {
	First netip.Addr
	Last  netip.Addr
}

// ParseAddressRange reads "198.51.100.128/26" or "198.51.100.200-198.51.100.210".
// A CIDR with host bits set is refused: it is almost always a typo.
func ParseAddressRange(s string) (AddressRange, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return AddressRange{}, fmt.Errorf("invalid CIDR")
		}
		if p.Masked() != p {
			return AddressRange{}, fmt.Errorf("invalid CIDR: host bits set, did you mean %s", p.Masked())
		}
		return PrefixRange(p), nil
	}
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return AddressRange{}, fmt.Errorf("must be a CIDR (198.51.100.128/26) or a range (198.51.100.200-198.51.100.210)")
	}
	a, err := parseAddr(strings.TrimSpace(first))
	if err != nil {
		return AddressRange{}, fmt.Errorf("invalid range start: %v", err)
	}
	b, err := parseAddr(strings.TrimSpace(last))
	if err != nil {
		return AddressRange{}, fmt.Errorf("invalid range end: %v", err)
	}
	if a.Is4() != b.Is4() {
		return AddressRange{}, fmt.Errorf("range mixes IPv4 and IPv6")
	}
	if b.Less(a) {
		return AddressRange{}, fmt.Errorf("range start %s is after its end %s", a, b)
	}
	return AddressRange{First: a, Last: b}, nil
}

// parseAddr accepts only plain addresses: zones and IPv4-mapped IPv6 forms
// would make the same VIP compare unequal to itself.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid IP address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IPv6 zone is not allowed")
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address is not allowed, write it as IPv4")
	}
	return a, nil
}

// PrefixRange is the addresses of p, which must be masked.
func PrefixRange(p netip.Prefix) AddressRange {
	return AddressRange{First: p.Addr(), Last: lastAddr(p)}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		switch {
		case bits >= 8:
			bits -= 8
		case bits > 0:
			b[i] |= byte(0xff >> bits)
			bits = 0
		default:
			b[i] = 0xff
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Is4 tells the range's family.
func (r AddressRange) Is4() bool { return r.First.Is4() }

// Contains reports whether a is inside the range.
func (r AddressRange) Contains(a netip.Addr) bool {
	return a.Is4() == r.Is4() && !a.Less(r.First) && !r.Last.Less(a)
}

// Overlaps reports whether the two ranges share an address.
func (r AddressRange) Overlaps(o AddressRange) bool {
	return r.Is4() == o.Is4() && !r.Last.Less(o.First) && !o.Last.Less(r.First)
}

// Within reports whether the whole range lies inside prefix p.
func (r AddressRange) Within(p netip.Prefix) bool {
	return p.Contains(r.First) && p.Contains(r.Last)
}

// Size is the number of addresses in the range (IPv6 ranges can exceed
// uint64, hence big.Int).
func (r AddressRange) Size() *big.Int {
	a := new(big.Int).SetBytes(r.First.AsSlice())
	b := new(big.Int).SetBytes(r.Last.AsSlice())
	return b.Sub(b, a).Add(b, big.NewInt(1))
}

func (r AddressRange) String() string {
	return r.First.String() + "-" + r.Last.String()
}

// Anchors are the addresses a pool's VRRP instances put in their adverts,
// for one family: instance k holds Anchors(v4)[k]. They are the last
// Instances addresses of the pool's last range of that family and are
// never allocated to a Service.
//
// keepalived ignores an advert whose address list differs from its own
// ("received an unexpected ip number count"), and both nodes then hold the
// VIPs: a split brain whenever two nodes' sidecars disagree on a pool's
// addresses (measured in the lab, see docs/lab.md). So the advertised set
// is this constant anchor, and the Services' addresses travel as
// virtual_ipaddress_excluded, which adverts leave out.
//
// A bgp pool has no instances and so no anchors: every address may go to
// a Service.
func (p *ServicePool) Anchors(v4 bool) []netip.Addr {
	if p.IsBGP() {
		return nil
	}
	var last *AddressRange
	for _, a := range p.Addresses {
		r, err := ParseAddressRange(a)
		if err == nil && r.Is4() == v4 {
			last = &r
		}
	}
	if last == nil {
		return nil
	}
	out := make([]netip.Addr, 0, p.Instances)
	for a := last.Last; len(out) < p.Instances && last.Contains(a); a = a.Prev() {
		out = append(out, a)
	}
	return out
}

// IsAnchor tells whether a is one of the pool's anchors.
func (p *ServicePool) IsAnchor(a netip.Addr) bool {
	for _, x := range p.Anchors(a.Is4()) {
		if x == a {
			return true
		}
	}
	return false
}

// Prefixes are the fewest CIDRs that together hold exactly the range,
// in order: what a prefix-list must name to match the range.
func (r AddressRange) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for start := r.First; ; {
		var p netip.Prefix
		for bits := 0; bits <= start.BitLen(); bits++ {
			q := netip.PrefixFrom(start, bits)
			if q.Masked().Addr() == start && !r.Last.Less(lastAddr(q)) {
				p = q
				break
			}
		}
		out = append(out, p)
		end := lastAddr(p)
		if end == r.Last {
			return out
		}
		start = end.Next()
	}
}
