package v1alpha1

// The API's part of validation: its VIPs and ports, api-int's own VIPs
// and allow-list, and the bootstrap host that holds the API VIP during an
// install.

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func (v *validator) api(a *APISpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(a.VIPs) == 0 {
		errs = append(errs, field.Required(path.Child("vips"), "the API VIP, one per IP family"))
	}
	if a.InternalLoadBalancerPort != 0 && a.InternalPort == 0 {
		errs = append(errs, field.Invalid(path.Child("internalLoadBalancerPort"), a.InternalLoadBalancerPort, "set only together with internalPort"))
	}
	errs = append(errs, v.vipList(a.VIPs, path.Child("vips"), a.Routed)...)
	errs = append(errs, v.vipList(a.InternalVIPs, path.Child("internalVIPs"), a.Routed)...)
	errs = append(errs, internalVIPFamilies(a, path.Child("internalVIPs"))...)
	errs = append(errs, validateCIDRs(a.InternalAllowedSources, path.Child("internalAllowedSources"))...)
	if len(a.InternalAllowedSources) > 0 && !a.GuardsInternal() {
		errs = append(errs, field.Invalid(path.Child("internalAllowedSources"), a.InternalAllowedSources,
			"set only together with internalPort or internalVIPs: without either there is nothing it would let in"))
	}
	ports := map[int32]*field.Path{}
	for _, p := range []struct {
		name string
		val  int32
		use  portUse
	}{
		{"port", a.Port, forwardsTo},
		{"internalPort", a.InternalPort, forwardsTo},
		{"internalLoadBalancerPort", a.InternalLoadBalancerPort, listens},
		{"loadBalancerPort", a.LoadBalancerPort, listens},
		{"healthPort", a.HealthPort, listens},
	} {
		if p.val == 0 && (p.name == "internalPort" || p.name == "internalLoadBalancerPort") {
			continue
		}
		fp := path.Child(p.name)
		if bad := validatePort(p.val, fp); len(bad) > 0 {
			errs = append(errs, bad...)
			continue
		}
		if prev, dup := ports[p.val]; dup {
			errs = append(errs, field.Duplicate(fp, fmt.Sprintf("%d (also %s)", p.val, prev)))
			continue
		}
		ports[p.val] = fp
		errs = append(errs, v.nodePort(p.val, fp, p.use)...)
	}
	return errs
}

// internalVIPFamilies keeps api-int's VIPs to the families of the API's:
// it is the same API, and every node and the bootstrap host speak VRRP
// for it from the address they use for the API VIP's family.
func internalVIPFamilies(a *APISpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	api := map[bool]bool{}
	for _, s := range a.VIPs {
		if ip, err := parseAddr(s); err == nil {
			api[ip.Is4()] = true
		}
	}
	for i, s := range a.InternalVIPs {
		if ip, err := parseAddr(s); err == nil && !api[ip.Is4()] {
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("spec.api.vips has no %s VIP: api-int serves the same API, in its families", familyName(ip))))
		}
	}
	return errs
}

// validateCIDRs checks a list of CIDRs (no host bits set).
func validateCIDRs(list []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Index(i), s, "invalid CIDR"))
		case p.Masked() != p:
			errs = append(errs, field.Invalid(path.Index(i), s, "invalid CIDR: host bits set, did you mean "+p.Masked().String()))
		}
	}
	return errs
}

// bootstrap checks the bootstrap host's addresses: one per family of the
// API VIPs (the host speaks VRRP in each family's API instance), each in
// that VIP's machine network (VRRP stays on one segment), none of a family
// without an API VIP. That an address is no VIP is checked with the
// reserved addresses (ReservedAddresses), that it is no node's own with
// the nodes (ValidateNodes).
func (v *validator) bootstrap(s *ClusterVIPsSpec, path *field.Path) field.ErrorList {
	b := s.Bootstrap
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	addrs := path.Child("addresses")
	if len(b.Addresses) == 0 {
		return append(errs, field.Required(addrs, "the bootstrap host's own address, one per IP family of spec.api.vips"))
	}
	apiVIPs := map[bool]netip.Addr{}
	for _, vip := range s.API.VIPs {
		if a, err := parseAddr(vip); err == nil {
			apiVIPs[a.Is4()] = a
		}
	}
	families := map[bool]int{}
	for i, str := range b.Addresses {
		p := addrs.Index(i)
		a, err := parseAddr(str)
		if err != nil {
			errs = append(errs, field.Invalid(p, str, err.Error()))
			continue
		}
		if prev, dup := families[a.Is4()]; dup {
			errs = append(errs, field.Invalid(p, str, fmt.Sprintf("a second %s address; %s already is one (one per family)", familyName(a), addrs.Index(prev))))
			continue
		}
		families[a.Is4()] = i
		if sr, bad := specialOf(AddressRange{First: a, Last: a}); bad {
			errs = append(errs, field.Invalid(p, str, "not a usable unicast address: in "+sr.String()))
			continue
		}
		vip, ok := apiVIPs[a.Is4()]
		if !ok {
			errs = append(errs, field.Invalid(p, str, fmt.Sprintf("spec.api.vips has no %s VIP for the bootstrap host to hold", familyName(a))))
			continue
		}
		if s.API.Routed {
			// Its adverts cross routers like the nodes'; it sends them,
			// and peers with its routers, from a machine network.
			if _, ok := v.networkOf(AddressRange{First: a, Last: a}); !ok {
				errs = append(errs, field.Invalid(p, str, "outside every machine network: the bootstrap host of a routed API VIP sends its VRRP adverts from a machine network address, as the control-plane nodes do"))
			}
			continue
		}
		if n, ok := v.networkOf(AddressRange{First: vip, Last: vip}); ok && !n.Contains(a) {
			errs = append(errs, field.Invalid(p, str, fmt.Sprintf("outside machine network %s of the %s API VIP %s: VRRP reaches only that segment", n, familyName(a), vip)))
		}
		for _, is := range s.API.InternalVIPs {
			ivip, err := parseAddr(is)
			if err != nil || ivip.Is4() != a.Is4() {
				continue
			}
			if n, ok := v.networkOf(AddressRange{First: ivip, Last: ivip}); ok && !n.Contains(a) {
				errs = append(errs, field.Invalid(p, str, fmt.Sprintf("outside machine network %s of the %s api-int VIP %s: the bootstrap host holds it too, and VRRP reaches only that segment", n, familyName(a), ivip)))
			}
		}
	}
	for _, v4 := range []bool{true, false} {
		if vip, ok := apiVIPs[v4]; ok {
			if _, has := families[v4]; !has {
				errs = append(errs, field.Required(addrs, fmt.Sprintf("an %s address: the bootstrap host speaks VRRP for the %s API VIP %s from it", familyName(vip), familyName(vip), vip)))
			}
		}
	}
	return errs
}
