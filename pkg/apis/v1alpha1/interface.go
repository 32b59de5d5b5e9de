package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// VIPInterface is where the VIPs of a service pool or an IngressController
// live when not on the node's VRRP interface: an interface of the same
// name on every node, or the one a node label names. The zero value means
// the VRRP interface.
type VIPInterface struct {
	Name, Label string
}

// VIPInterface is the pool's interface and interfaceLabel.
func (p ServicePool) VIPInterface() VIPInterface {
	return VIPInterface{Name: p.Interface, Label: p.InterfaceLabel}
}

// VIPInterface is the controller's interface and interfaceLabel.
func (in IngressSpec) VIPInterface() VIPInterface {
	return VIPInterface{Name: in.Interface, Label: in.InterfaceLabel}
}

// HasOwnInterfaces tells whether some pool or IngressController puts its
// VIPs on an interface of their own.
func (c *ClusterVIPs) HasOwnInterfaces() bool {
	for _, p := range c.Spec.ServicePools {
		if p.VIPInterface().Own() {
			return true
		}
	}
	for _, in := range c.Spec.Ingress {
		if in.VIPInterface().Own() {
			return true
		}
	}
	return false
}

// Own tells whether the VIPs leave the VRRP interface.
func (i VIPInterface) Own() bool { return i.Name != "" || i.Label != "" }

// On returns the interface on a node with these labels. A node without
// the label, or whose label's value is no interface name (it lands in
// keepalived.conf), has none: why says so.
func (i VIPInterface) On(labels map[string]string) (iface, why string) {
	if i.Label == "" {
		return i.Name, ""
	}
	v, ok := labels[i.Label]
	if !ok {
		return "", "no label " + i.Label
	}
	if msg := InterfaceNameError(v); msg != "" {
		return "", fmt.Sprintf("label %s=%s: %s", i.Label, v, msg)
	}
	return v, ""
}

// String names the interface for messages.
func (i VIPInterface) String() string {
	if i.Label != "" {
		return "the interface in node label " + i.Label
	}
	return i.Name
}

// vipInterface checks interface and interfaceLabel of a pool or an
// IngressController: one of them, a valid name or label key, and a
// machine network of each VIP family for VRRP to speak from.
func (v *validator) vipInterface(i VIPInterface, vips []netip.Addr, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if i.Name != "" && i.Label != "" {
		errs = append(errs, field.Invalid(path.Child("interfaceLabel"), i.Label, "set interface or interfaceLabel, not both"))
	}
	if i.Name != "" {
		if msg := InterfaceNameError(i.Name); msg != "" {
			errs = append(errs, field.Invalid(path.Child("interface"), i.Name, msg))
		}
	}
	if i.Label != "" {
		for _, m := range validation.IsQualifiedName(i.Label) {
			errs = append(errs, field.Invalid(path.Child("interfaceLabel"), i.Label, m))
		}
	}
	if !i.Own() || len(v.networks) == 0 {
		return errs
	}
	seen := map[bool]bool{}
	for _, a := range vips {
		if seen[a.Is4()] {
			continue
		}
		seen[a.Is4()] = true
		if !slices.ContainsFunc(v.networks, func(n netip.Prefix) bool { return n.Addr().Is4() == a.Is4() }) {
			f, val := path.Child("interface"), i.Name
			if i.Label != "" {
				f, val = path.Child("interfaceLabel"), i.Label
			}
			errs = append(errs, field.Invalid(f, val, fmt.Sprintf("VRRP for the %s VIPs speaks from the nodes' address in a machine network of that family, and spec.machineNetworks has no %s network", familyName(a), familyName(a))))
		}
	}
	return errs
}

// poolInterface checks a pool's interface fields: vrrp pools with
// announce: keepalived only (a bgp pool's addresses are routes, and the
// sidecar's announcing, handover and proxy-neighbour machinery works on
// the VRRP interface alone).
func (v *validator) poolInterface(pool *ServicePool, path *field.Path) field.ErrorList {
	i := pool.VIPInterface()
	if !i.Own() {
		return nil
	}
	f, val := path.Child("interface"), i.Name
	if i.Label != "" {
		f, val = path.Child("interfaceLabel"), i.Label
	}
	switch {
	case pool.IsBGP():
		return field.ErrorList{field.Invalid(f, val, "only for mode vrrp: a bgp pool's addresses are routes, on no interface")}
	case pool.SidecarAnnounced():
		return field.ErrorList{field.Invalid(f, val, "only with announce: keepalived: the sidecar announces Service addresses on spec.vrrp.interface alone")}
	}
	var vips []netip.Addr
	for _, a := range pool.Addresses {
		if r, err := ParseAddressRange(a); err == nil {
			vips = append(vips, r.First)
		}
	}
	return v.vipInterface(i, vips, path)
}

// parsedAddrs are the valid addresses of list (vipList reports the rest).
func parsedAddrs(list []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		if a, err := parseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}
