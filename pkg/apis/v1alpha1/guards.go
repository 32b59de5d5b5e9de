package v1alpha1

// Security guards a config must not defeat: the allow-list in front of
// the machine config server, and the namespaces that may claim a pool's
// addresses as external IPs. docs/security.md lists each with what it
// refuses.

import (
	"fmt"
	"math/big"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The widest allow-list the internal API guard takes, per family: a /8
// of IPv4 (10.0.0.0/8, a whole private network, still passes) and a /32
// of IPv6 (a whole site's allocation). Wider lets in most of the internet
// (0.0.0.0/0, ::/0, 0.0.0.0/1, 2000::/3), which defeats the guard: the
// machine config server would hand the cluster's secrets to anyone who
// reaches a node. The limit counts the union of a family's entries, so
// that 0.0.0.0/1 and 128.0.0.0/1 together are refused as 0.0.0.0/0 is.
const (
	widestAllowedSources4 = 8
	widestAllowedSources6 = 32
)

// WidestAllowedSources is the shortest prefix length, and so the largest
// number of addresses, internalAllowedSources may let in for a family.
func WidestAllowedSources(is4 bool) int {
	if is4 {
		return widestAllowedSources4
	}
	return widestAllowedSources6
}

// allowedSourcesWidth refuses an allow-list that lets in more than
// WidestAllowedSources of either family: each entry on its own, then the
// entries of a family together. list is spec.api.internalAllowedSources
// when set, else the machine networks that stand in for it (defaulted
// says which, for the message).
func allowedSourcesWidth(list []string, path *field.Path, defaulted bool) field.ErrorList {
	var errs field.ErrorList
	why := "would let most of the internet fetch the cluster's secrets from the machine config server"
	if defaulted {
		why += " (this machine network is spec.api.internalAllowedSources' default: set that list to the subnets machines boot in)"
	}
	var prefixes []netip.Prefix
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			continue // reported on its own
		}
		if widest := WidestAllowedSources(p.Addr().Is4()); p.Bits() < widest {
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("wider than a /%d: %s", widest, why)))
			continue
		}
		prefixes = append(prefixes, p)
	}
	for _, is4 := range []bool{true, false} {
		widest := WidestAllowedSources(is4)
		bits := 32
		if !is4 {
			bits = 128
		}
		limit := new(big.Int).Lsh(big.NewInt(1), uint(bits-widest))
		if total := unionSize(prefixes, is4); total.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path, list, fmt.Sprintf("its %s entries together let in more addresses than a /%d: %s", familyWord(is4), widest, why)))
		}
	}
	return errs
}

func familyWord(is4 bool) string {
	if is4 {
		return "IPv4"
	}
	return "IPv6"
}

// unionSize counts the addresses of one family's prefixes together: two
// prefixes are either nested or apart, so those inside no other are
// counted.
func unionSize(prefixes []netip.Prefix, is4 bool) *big.Int {
	total := new(big.Int)
	for i, p := range prefixes {
		if p.Addr().Is4() != is4 {
			continue
		}
		inner := false
		for j, q := range prefixes {
			if i != j && q.Bits() <= p.Bits() && q.Contains(p.Addr()) && (q.Bits() < p.Bits() || j < i) {
				inner = true
				break
			}
		}
		if !inner {
			total.Add(total, AddressRange{First: p.Addr(), Last: lastAddr(p)}.Size())
		}
	}
	return total
}

// internalGuard checks the allow-list of the internal API's guard
// whenever the guard is on.
func internalGuard(s *ClusterVIPsSpec, spec *field.Path) field.ErrorList {
	if !s.API.GuardsInternal() {
		return nil
	}
	if len(s.API.InternalAllowedSources) > 0 {
		return allowedSourcesWidth(s.API.InternalAllowedSources, spec.Child("api", "internalAllowedSources"), false)
	}
	return allowedSourcesWidth(s.MachineNetworks, spec.Child("machineNetworks"), true)
}

// externalIPsGuard refuses a pool that lets Services name its addresses
// in spec.externalIPs without saying whose Services: that field is free
// text any Service owner may write (CVE-2020-8554), so without
// namespaces every tenant could claim the pool's addresses.
func externalIPsGuard(c *ClusterVIPs) field.ErrorList {
	var errs field.ErrorList
	for i, p := range c.Spec.ServicePools {
		if p.ExternalIPs && len(p.Namespaces) == 0 {
			errs = append(errs, field.Required(field.NewPath("spec", "servicePools").Index(i).Child("namespaces"),
				"externalIPs: true lets Services of these namespaces claim the pool's addresses in spec.externalIPs; without namespaces every tenant could (CVE-2020-8554)"))
		}
	}
	return errs
}
