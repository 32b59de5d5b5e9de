package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Reserved is an address that must never be a VIP or be handed to a
// Service, and why: a Service given a node's own address or its subnet's
// broadcast address takes traffic from that node or from the whole segment.
type Reserved struct {
	Addr netip.Addr
	Why  string
}

// NodeAddresses are one node's own addresses, as `--nodes` or the Node
// objects give them.
type NodeAddresses struct {
	Name      string
	Addresses []netip.Addr
	// ControlPlane says the node is a control-plane node: the only kind
	// whose host may bootstrap the cluster in place (bootstrapNotANode).
	ControlPlane bool
}

// ReservedAddresses lists what the config and the nodes say must never be
// given out: each machine network's network address (the IPv6
// subnet-router anycast address too), its IPv4 broadcast address, and
// every node's own addresses, and the bootstrap host's (spec.bootstrap).
// validate, render and the allocator all ask this one function.
func (c *ClusterVIPs) ReservedAddresses(nodes []NodeAddresses) []Reserved {
	var out []Reserved
	nodeReserved := nodesReserved(nodes)
	if b := c.Spec.Bootstrap; b != nil {
		for i, s := range b.Addresses {
			a, err := parseAddr(s)
			if err != nil {
				continue
			}
			why := fmt.Sprintf("the address of the bootstrap host (spec.bootstrap.addresses[%d])", i)
			// In place (the agent-based installer's rendezvous host), one
			// address is both: one entry saying so, not two errors.
			if j := slices.IndexFunc(nodeReserved, func(r Reserved) bool { return r.Addr == a }); j >= 0 {
				why += " and of " + strings.TrimPrefix(nodeReserved[j].Why, "the address of ")
				nodeReserved = slices.Delete(nodeReserved, j, j+1)
			}
			out = append(out, Reserved{Addr: a, Why: why})
		}
	}
	for _, s := range c.Spec.MachineNetworks {
		n, err := netip.ParsePrefix(s)
		if err != nil || n.Masked() != n {
			continue
		}
		out = append(out, networkReserved(n)...)
	}
	return append(out, nodeReserved...)
}

func nodesReserved(nodes []NodeAddresses) []Reserved {
	var out []Reserved
	for _, n := range nodes {
		for _, a := range n.Addresses {
			out = append(out, Reserved{Addr: a, Why: "the address of node " + n.Name})
		}
	}
	return out
}

func networkReserved(n netip.Prefix) []Reserved {
	// A /31 or /32 (/127, /128) has no network or broadcast address to
	// keep free (RFC 3021).
	if n.Bits() >= n.Addr().BitLen()-1 {
		return nil
	}
	out := []Reserved{{Addr: n.Addr(), Why: "the network address of machine network " + n.String()}}
	if n.Addr().Is4() {
		out = append(out, Reserved{Addr: lastAddr(n), Why: "the broadcast address of machine network " + n.String()})
	}
	return out
}

// ValidateNodes is what `vipctl validate`, `vipctl render` and `vipctl
// update` check on top of Validate, with the nodes when known (the
// `--nodes` list): no VIP may be a node's own address, no pool may
// contain a reserved address, and a pool with externalIPs must name its
// namespaces.
//
// Pools are checked here and not in Validate because the sidecar and the
// allocator parse the cluster's ConfigMap with Validate: a pool that
// worked before this check (a /25 ending on the broadcast address, an
// externalIPs pool open to every namespace) must not stop every VIP of a
// running cluster. At run time the allocator skips reserved addresses
// instead.
func ValidateNodes(c *ClusterVIPs, nodes []NodeAddresses) field.ErrorList {
	errs := reservedVIPs(c, nodesReserved(nodes))
	errs = append(errs, bootstrapNotANode(c, nodes)...)
	errs = append(errs, reservedInPools(c, c.ReservedAddresses(nodes))...)
	return append(errs, externalIPsGuard(c)...)
}

// bootstrapNotANode refuses a bootstrap address that a worker has. A
// control-plane node's is the in-place bootstrap of the agent-based
// installer (docs/bootstrap.md): its rendezvous host bootstraps the
// cluster and then reboots into that node, so the control-plane nodes'
// API instance already lists the address as a peer and the plan renders
// the two as one host (render.Plan). A worker is no member of the API
// instance, and the agent-based installer never makes one the
// rendezvous host: its address as the bootstrap host's would have the
// control-plane nodes accept adverts for the API VIP from a worker, for as
// long as spec.bootstrap stays.
func bootstrapNotANode(c *ClusterVIPs, nodes []NodeAddresses) field.ErrorList {
	b := c.Spec.Bootstrap
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "bootstrap", "addresses")
	for i, s := range b.Addresses {
		a, err := parseAddr(s)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if !n.ControlPlane && slices.Contains(n.Addresses, a) {
				errs = append(errs, field.Invalid(path.Index(i), s, "is the address of node "+n.Name+", which is no control-plane node: "+
					"only a control-plane node's host bootstraps in place (the agent-based installer's rendezvous host); a worker never holds the API VIP"))
			}
		}
	}
	return errs
}

// reservedVIPs refuses API and ingress VIPs equal to a reserved address.
func reservedVIPs(c *ClusterVIPs, reserved []Reserved) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	vips := func(list []string, path *field.Path) {
		for i, s := range list {
			a, err := parseAddr(s)
			if err != nil {
				continue
			}
			for _, r := range reserved {
				if r.Addr == a {
					errs = append(errs, field.Invalid(path.Index(i), s, "is "+r.Why))
				}
			}
		}
	}
	vips(c.Spec.API.VIPs, spec.Child("api", "vips"))
	vips(c.Spec.API.InternalVIPs, spec.Child("api", "internalVIPs"))
	for i, in := range c.Spec.Ingress {
		vips(in.VIPs, spec.Child("ingress").Index(i).Child("vips"))
	}
	return errs
}

// reservedInPools refuses pool addresses that contain a reserved address.
func reservedInPools(c *ClusterVIPs, reserved []Reserved) field.ErrorList {
	var errs field.ErrorList
	pools := field.NewPath("spec", "servicePools")
	for i, p := range c.Spec.ServicePools {
		for j, s := range p.Addresses {
			r, err := ParseAddressRange(s)
			if err != nil {
				continue
			}
			for _, res := range reserved {
				if r.Contains(res.Addr) {
					errs = append(errs, field.Invalid(pools.Index(i).Child("addresses").Index(j), s,
						"contains "+res.Addr.String()+", "+res.Why+", which must never be handed out"))
				}
			}
		}
	}
	return errs
}
