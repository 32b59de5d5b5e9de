package v1alpha1

// Addresses no VIP, pool or BGP peer may be: the blocks the IP
// specifications set aside, which no node can hold for clients or reach a
// router at.

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SpecialRange is a block of addresses set aside by the IP
// specifications, and what for.
type SpecialRange struct {
	Prefix netip.Prefix
	Why    string
}

// specialRanges is the one table: vipList, the bootstrap host, every
// pool (whatever its mode) and every BGP peer are checked against it, and
// hack/gendocs prints it.
var specialRanges = []SpecialRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\", the unspecified address among them (RFC 1122)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback (RFC 1122)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (RFC 3927)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (RFC 5771)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, the limited broadcast address 255.255.255.255 among them (RFC 1112, RFC 919)"},
	{netip.MustParsePrefix("::/128"), "unspecified (RFC 4291)"},
	{netip.MustParsePrefix("::1/128"), "loopback (RFC 4291)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (RFC 4291)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (RFC 4291)"},
}

// SpecialRanges is the table, for the config reference.
func SpecialRanges() []SpecialRange { return specialRanges }

// specialOf is the special range r overlaps, if any.
func specialOf(r AddressRange) (SpecialRange, bool) {
	for _, s := range specialRanges {
		if PrefixRange(s.Prefix).Overlaps(r) {
			return s, true
		}
	}
	return SpecialRange{}, false
}

func (s SpecialRange) String() string { return fmt.Sprintf("%s, %s", s.Prefix, s.Why) }

// specialPools refuses pool addresses in a special range, for pools of
// every mode: no Service can be given one (a bgp pool is announced
// anywhere, so the machine networks do not keep it out).
func specialPools(pools []ServicePool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range pools {
		for j, a := range p.Addresses {
			r, err := ParseAddressRange(a)
			if err != nil {
				continue
			}
			if s, bad := specialOf(r); bad {
				errs = append(errs, field.Invalid(path.Index(i).Child("addresses").Index(j), a, "overlaps "+s.String()+": no Service can be given such an address"))
			}
		}
	}
	return errs
}

// peerAddress refuses a BGP peer at an address no router can have for
// the nodes: in a special range, a VIP, inside a pool (those addresses go
// to Services), or a machine network's network or broadcast address. A
// peer equal to a node's own address is checked with the nodes.
func peerAddress(c *ClusterVIPs, a netip.Addr) string {
	if s, bad := specialOf(AddressRange{First: a, Last: a}); bad {
		return "not a router's address: in " + s.String()
	}
	for _, vip := range c.vipPaths() {
		if vip.addr == a {
			return "is " + vip.path.String() + ": a VIP, not a router"
		}
	}
	pools := field.NewPath("spec", "servicePools")
	for i, p := range c.Spec.ServicePools {
		for j, s := range p.Addresses {
			if r, err := ParseAddressRange(s); err == nil && r.Contains(a) {
				return "inside " + pools.Index(i).Child("addresses").Index(j).String() + ": the pool's addresses are given to Services"
			}
		}
	}
	for _, r := range c.ReservedAddresses(nil) {
		if r.Addr == a {
			return "is " + r.Why
		}
	}
	return ""
}

// vipPaths are the API and ingress VIPs with their paths.
func (c *ClusterVIPs) vipPaths() []seenVIP {
	var out []seenVIP
	add := func(list []string, path *field.Path) {
		for i, s := range list {
			if a, err := parseAddr(s); err == nil {
				out = append(out, seenVIP{addr: a, path: path.Index(i)})
			}
		}
	}
	spec := field.NewPath("spec")
	add(c.Spec.API.VIPs, spec.Child("api", "vips"))
	add(c.Spec.API.InternalVIPs, spec.Child("api", "internalVIPs"))
	for i, in := range c.Spec.Ingress {
		add(in.VIPs, spec.Child("ingress").Index(i).Child("vips"))
	}
	return out
}
