package clusterlab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// Carriers is one reading of who carries addresses in the lab: every
// running node's uplink addresses, read at once, and, when first asked
// for, the nodes' IPv6 proxy neighbours and the router's routes of one
// family, all over netlink in their namespaces. A loop that follows many
// addresses reads it once a tick: asked address by address with ip, the
// roll's timeline ran ip in every node for each of its 16 addresses,
// about 90 runs every 100 ms, and the test's child processes took half
// a core of the two the lab shares (2026-12-02, /proc accounting over a
// rollback).
type Carriers struct {
	c   *Cluster
	err error
	// held maps an address on a running node's uplink (its own,
	// link-local ones and the VIPs it holds) to the nodes, in order.
	held map[netip.Addr][]string
	// proxied maps an IPv6 proxy neighbour entry to the nodes, once read.
	proxied map[netip.Addr][]string
	// routes maps the destination of each of the router's host routes
	// to its next hops, per family once read.
	routes map[bool]map[netip.Addr][]netip.Addr
}

// ReadCarriers reads every running node's uplink addresses.
func (c *Cluster) ReadCarriers() *Carriers {
	v := &Carriers{c: c, held: map[netip.Addr][]string{}, routes: map[bool]map[netip.Addr][]netip.Addr{}}
	v.eachUplink("addresses", func(n *Node, link netlink.Link) error {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				v.held[ip.Unmap()] = append(v.held[ip.Unmap()], n.Name)
			}
		}
		return err
	})
	return v
}

// eachUplink calls read with every running node's uplink, in the node's
// namespace, and keeps what fails.
func (v *Carriers) eachUplink(what string, read func(*Node, netlink.Link) error) {
	for _, n := range v.c.Nodes {
		if !n.Running() {
			continue
		}
		err := n.Host.Do(func() error {
			link, err := netlink.LinkByName(n.Host.Iface)
			if err != nil {
				return err
			}
			return read(n, link)
		})
		if err != nil {
			v.err = errors.Join(v.err, fmt.Errorf("%s: %s %s: %w", n.Name, n.Host.Iface, what, err))
		}
	}
}

// Err is what could not be read, nil when everything was.
func (v *Carriers) Err() error { return v.err }

// Holders are the nodes that answer for addr on their VRRP interface,
// sorted: it is on the interface, or (an IPv6 address of a
// sidecar-announced pool, docs/runtimecfg.md) the node answers for it by
// a proxy neighbour entry.
func (v *Carriers) Holders(addr string) []string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil
	}
	out := slices.Clone(v.held[a])
	if a.Is6() {
		out = append(out, v.proxy()[a]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// proxy reads the running nodes' IPv6 proxy neighbour entries once.
func (v *Carriers) proxy() map[netip.Addr][]string {
	if v.proxied != nil {
		return v.proxied
	}
	v.proxied = map[netip.Addr][]string{}
	v.eachUplink("proxy neighbours", func(n *Node, link netlink.Link) error {
		neighs, err := netlink.NeighProxyList(link.Attrs().Index, netlink.FAMILY_V6)
		for _, e := range neighs {
			if ip, ok := netip.AddrFromSlice(e.IP); ok {
				v.proxied[ip] = append(v.proxied[ip], n.Name)
			}
		}
		return err
	})
	return v.proxied
}

// TorHops are the nodes the router's route to vip leads to, sorted: the
// nodes announcing it over BGP that the router installed. A next hop
// that is no node's address stays an address.
func (v *Carriers) TorHops(vip string) []string {
	a, err := netip.ParseAddr(vip)
	if err != nil {
		return nil
	}
	byAddr := v.nodeAddrs()
	var hops []string
	for _, h := range v.hostRoutes(a.Is6())[a] {
		if n, ok := byAddr[h]; ok {
			hops = append(hops, n)
		} else {
			hops = append(hops, h.String())
		}
	}
	slices.Sort(hops)
	return slices.Compact(hops)
}

// hostRoutes reads the router's routes of one family once and keeps the
// next hops of its host routes (a multipath route's every one).
func (v *Carriers) hostRoutes(ipv6 bool) map[netip.Addr][]netip.Addr {
	if r, ok := v.routes[ipv6]; ok {
		return r
	}
	family, bits := netlink.FAMILY_V4, 32
	if ipv6 {
		family, bits = netlink.FAMILY_V6, 128
	}
	var routes []netlink.Route
	err := v.c.Tor.Do(func() error {
		var err error
		routes, err = netlink.RouteList(nil, family)
		return err
	})
	if err != nil {
		v.err = errors.Join(v.err, fmt.Errorf("the router's routes: %w", err))
	}
	v.routes[ipv6] = hostRouteHops(routes, bits)
	return v.routes[ipv6]
}

// hostRouteHops maps the destination of each host route (bits long) to
// its gateways: a multipath route's every one, none for a route without
// (a blackhole).
func hostRouteHops(routes []netlink.Route, bits int) map[netip.Addr][]netip.Addr {
	r := map[netip.Addr][]netip.Addr{}
	for _, rt := range routes {
		if rt.Dst == nil {
			continue
		}
		dst, ok := netip.AddrFromSlice(rt.Dst.IP)
		if ones, _ := rt.Dst.Mask.Size(); !ok || ones != bits {
			continue
		}
		dst = dst.Unmap()
		if _, seen := r[dst]; !seen {
			r[dst] = nil
		}
		gws := []net.IP{rt.Gw}
		for _, nh := range rt.MultiPath {
			gws = append(gws, nh.Gw)
		}
		for _, gw := range gws {
			if h, ok := netip.AddrFromSlice(gw); ok {
				r[dst] = append(r[dst], h.Unmap())
			}
		}
	}
	return r
}

// nodeAddrs maps every address of the running nodes' uplinks (IPv6
// link-local ones too: the router's IPv6 next hops) to the node.
func (v *Carriers) nodeAddrs() map[netip.Addr]string {
	m := map[netip.Addr]string{}
	for a, nodes := range v.held {
		m[a] = nodes[len(nodes)-1]
	}
	// The node's own addresses win over VIPs it may carry.
	for _, s := range Nodes {
		m[netip.MustParseAddr(s.IP4)] = s.Name
		m[netip.MustParseAddr(s.IP6)] = s.Name
	}
	return m
}

// Holders are the nodes that answer for addr on their VRRP interface
// (Carriers.Holders), read now.
func (c *Cluster) Holders(t testing.TB, addr string) []string {
	t.Helper()
	v := c.ReadCarriers()
	out := v.Holders(addr)
	if v.Err() != nil {
		t.Fatal(v.Err())
	}
	return out
}

// TorHops are the nodes the router's route to vip leads to
// (Carriers.TorHops), read now.
func (c *Cluster) TorHops(t testing.TB, vip string) []string {
	t.Helper()
	return c.ReadCarriers().TorHops(vip)
}
