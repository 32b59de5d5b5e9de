// Package cluster is the one model of a cluster that every other package
// reads: a ClusterVIPs compiled once into parsed pools with their lookups
// (which pool holds an address, which of its instances carries it, which
// VRRP instance key a VIP belongs to); the live ConfigMap's day-2 parts
// merged over the node's static file; and the observed Kubernetes objects
// turned into the State the renderer works from. It is pure: no I/O but
// reading a node list file.
package cluster

import (
	"math/big"
	"net/netip"
	"slices"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Model is a validated ClusterVIPs, compiled: every address of the
// config parsed once, here, for every consumer.
type Model struct {
	Config *v1alpha1.ClusterVIPs
	Pools  Pools
	// Class is which Services the config has vipctl serve.
	Class Class
	// API and APIInternal are spec.api.vips and internalVIPs; Ingress
	// each IngressController's VIPs, in the config's order.
	API, APIInternal []netip.Addr
	Ingress          []IngressVIPs
	// MachineNetworks are spec.machineNetworks.
	MachineNetworks []netip.Prefix
	// Bootstrap are spec.bootstrap.addresses, in their order (nil
	// without spec.bootstrap).
	Bootstrap []netip.Addr
	// BGPPeers are spec.bgp.peers, in their order (nil without spec.bgp).
	BGPPeers []BGPPeer
}

// BGPPeer is one of spec.bgp.peers with its address parsed.
type BGPPeer struct {
	*v1alpha1.BGPPeer
	// Addr is the router's address; the zero Addr for an unnumbered peer.
	Addr netip.Addr
}

// Name is how frr.conf names the session: the address, written as Go
// writes it (2001:db8::1 for 2001:DB8:0::1), or an unnumbered peer's
// interface.
func (p BGPPeer) Name() string {
	if p.Unnumbered() {
		return p.Interface
	}
	return p.Addr.String()
}

// IngressVIPs are one IngressController's VIPs, parsed.
type IngressVIPs struct {
	Name string
	VIPs []netip.Addr
}

// Pools are service pools in declaration order: the first pool containing
// an address owns it.
type Pools []*Pool

// Pool is a service pool with its addresses parsed.
type Pool struct {
	*v1alpha1.ServicePool
	Ranges  []v1alpha1.AddressRange
	anchors map[netip.Addr]bool
}

// Compile parses c's pools once. c must be valid (v1alpha1.Validate):
// unparsable entries are skipped, not reported.
func Compile(c *v1alpha1.ClusterVIPs) *Model {
	s := &c.Spec
	m := &Model{Config: c, Pools: CompilePools(s.ServicePools), Class: ClassOf(c),
		API: parseAddrs(s.API.VIPs), APIInternal: parseAddrs(s.API.InternalVIPs)}
	for _, in := range s.Ingress {
		m.Ingress = append(m.Ingress, IngressVIPs{Name: in.Name, VIPs: parseAddrs(in.VIPs)})
	}
	if s.Bootstrap != nil {
		m.Bootstrap = parseAddrs(s.Bootstrap.Addresses)
	}
	if s.BGP != nil {
		for i := range s.BGP.Peers {
			peer := BGPPeer{BGPPeer: &s.BGP.Peers[i]}
			if a, err := netip.ParseAddr(peer.Address); err == nil {
				peer.Addr = a
			} else if !peer.Unnumbered() {
				continue // refused by validation
			}
			m.BGPPeers = append(m.BGPPeers, peer)
		}
	}
	for _, n := range s.MachineNetworks {
		if p, err := netip.ParsePrefix(n); err == nil {
			m.MachineNetworks = append(m.MachineNetworks, p)
		}
	}
	return m
}

// parseAddrs parses addresses the config's validation has checked,
// skipping any it would have refused.
func parseAddrs(ss []string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// FixedVIPs are the API's, api-int's and every IngressController's VIPs,
// in that order: the addresses the config names (no Service's).
func (m *Model) FixedVIPs() []netip.Addr {
	out := slices.Concat(m.API, m.APIInternal)
	for _, in := range m.Ingress {
		out = append(out, in.VIPs...)
	}
	return out
}

// CompilePools parses pools once, like Compile.
func CompilePools(pools []v1alpha1.ServicePool) Pools {
	out := make(Pools, 0, len(pools))
	for i := range pools {
		sp := &pools[i]
		p := &Pool{ServicePool: sp, anchors: map[netip.Addr]bool{}}
		for _, s := range sp.Addresses {
			if r, err := v1alpha1.ParseAddressRange(s); err == nil {
				p.Ranges = append(p.Ranges, r)
			}
		}
		for _, v4 := range []bool{true, false} {
			for _, a := range sp.Anchors(v4) {
				p.anchors[a] = true
			}
		}
		out = append(out, p)
	}
	return out
}

// PoolOf returns the pool whose ranges contain a, or nil. Anchors count as
// inside: callers that hand out or serve addresses ask IsAnchor too.
func (m *Model) PoolOf(a netip.Addr) *Pool { return m.Pools.Of(a) }

// VRRPLocalServices are the Local Services that take a VRRP instance of
// their own: those of vrrp pools. A bgp pool's Local Services are
// announced by the nodes with an endpoint instead.
func (m *Model) VRRPLocalServices(st State) []LocalService {
	out := make([]LocalService, 0, len(st.LocalServices))
	for _, ls := range st.LocalServices {
		if p := m.Pool(ls.Pool); p == nil || !p.IsBGP() {
			out = append(out, ls)
		}
	}
	return out
}

// Pool returns the pool named name, or nil.
func (m *Model) Pool(name string) *Pool { return m.Pools.Named(name) }

// Of returns the pool whose ranges contain a, or nil (see Model.PoolOf).
func (ps Pools) Of(a netip.Addr) *Pool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return p
		}
	}
	return nil
}

// Named returns the pool named name, or nil.
func (ps Pools) Named(name string) *Pool {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Contains reports whether a lies in one of the pool's ranges.
func (p *Pool) Contains(a netip.Addr) bool {
	return slices.ContainsFunc(p.Ranges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) })
}

// Assignable is how many of the pool's addresses may go to Services: its
// ranges' sizes less its instances' anchors.
func (p *Pool) Assignable() *big.Int {
	n := new(big.Int)
	for _, r := range p.Ranges {
		n.Add(n, r.Size())
	}
	return n.Sub(n, big.NewInt(int64(len(p.anchors))))
}

// IsAnchor tells whether a is one of the addresses the pool's instances
// advertise (never handed to a Service).
func (p *Pool) IsAnchor(a netip.Addr) bool { return p.anchors[a] }

// Instance is which of the pool's VRRP instances carries a Service
// address: by the address's own hash, so allocating or releasing one
// address never moves another.
func (p *Pool) Instance(a netip.Addr) int {
	return int(Hash(a.AsSlice()) % uint64(p.Instances))
}

// InstanceAnchor is the address instance k of the pool advertises in the
// family v4 tells; false when the pool's ranges of that family have no
// anchor for it (fewer addresses than instances).
func (p *Pool) InstanceAnchor(k int, v4 bool) (netip.Addr, bool) {
	anchors := p.Anchors(v4)
	if k >= len(anchors) {
		return netip.Addr{}, false
	}
	return anchors[k], true
}

// AnchorOf is the anchor of the instance that carries the Service
// address a (announce: sidecar: a follows that anchor).
func (p *Pool) AnchorOf(a netip.Addr) (netip.Addr, bool) {
	return p.InstanceAnchor(p.Instance(a), a.Is4())
}

// Key is the VRRP instance key that carries a Service address of this
// pool; for a bgp pool, the key its announced routes are published under.
func (p *Pool) Key(a netip.Addr) v1alpha1.InstanceKey {
	if p.IsBGP() {
		return v1alpha1.BGPKey(p.Name)
	}
	return v1alpha1.PoolKey(p.Name, p.Instance(a))
}

// VIPKeys maps every VIP of the config and of st (Service addresses,
// Local Services) to the key of the VRRP instance that carries it: what a
// node publishes as held, and what status reads back.
func (m *Model) VIPKeys(st State) map[netip.Addr]v1alpha1.InstanceKey {
	out := map[netip.Addr]v1alpha1.InstanceKey{}
	for _, a := range m.API {
		out[a] = v1alpha1.KeyAPI
	}
	for _, a := range m.APIInternal {
		out[a] = v1alpha1.KeyAPIInternal
	}
	for _, in := range m.Ingress {
		for _, a := range in.VIPs {
			out[a] = v1alpha1.IngressKey(in.Name)
		}
	}
	for name, vips := range st.ServiceVIPs {
		p := m.Pool(name)
		if p == nil {
			continue
		}
		for _, a := range vips {
			out[a] = p.Key(a)
		}
	}
	for _, ls := range st.LocalServices {
		key := v1alpha1.ServiceKey(ls.Name)
		if p := m.Pool(ls.Pool); p != nil && p.IsBGP() {
			key = v1alpha1.BGPKey(p.Name) // announced, not a VRRP instance
		}
		for _, a := range ls.VIPs {
			out[a] = key
		}
	}
	return out
}
