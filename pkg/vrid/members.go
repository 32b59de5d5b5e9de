package vrid

import (
	"net/netip"
	"slices"
)

// Members are a cluster's own VRRP routers, by VRRP ID: what an advert
// of one of the cluster's IDs must come from to be the cluster's.
type Members map[uint8]*Routers

// Routers are the members of the instances that use one VRRP ID.
type Routers struct {
	// Keys name the instances (usually one; IPv4 and IPv6 instances of
	// one key share the ID).
	Keys []string
	// Sources are the addresses the members advertise from.
	Sources []netip.Addr
	// VIPs are the addresses the instances advertise.
	VIPs []netip.Addr
}

// Add records that the instance key, with ID id and the advertised
// addresses vips, has a member advertising from src.
func (m Members) Add(id uint8, key string, src netip.Addr, vips []netip.Addr) {
	r := m[id]
	if r == nil {
		r = &Routers{}
		m[id] = r
	}
	if !slices.Contains(r.Keys, key) {
		r.Keys = append(r.Keys, key)
	}
	if !slices.Contains(r.Sources, src) {
		r.Sources = append(r.Sources, src)
	}
	for _, v := range vips {
		if !slices.Contains(r.VIPs, v) {
			r.VIPs = append(r.VIPs, v)
		}
	}
}

// Foreign tells whether a comes from a router outside the cluster: it
// carries one of the cluster's IDs, in either family (as FindClashes
// counts a live clash: the IDs of a key are shared across families), from
// an address none of the cluster's members of that ID advertise from. An
// IPv6 advert from a link-local address (RFC 5798's source for multicast
// VRRP, which keepalived follows without unicast_src_ip) names no node:
// it is the cluster's when every address it carries is one of the ID's
// VIPs, as only a member advertises them.
func (m Members) Foreign(a Advert) bool {
	r, ours := m[a.ID]
	if !ours || slices.Contains(r.Sources, a.Source) {
		return false
	}
	if a.Source.Is6() && a.Source.IsLinkLocalUnicast() && len(a.Addresses) > 0 {
		for _, v := range a.Addresses {
			if !slices.Contains(r.VIPs, v) {
				return true
			}
		}
		return false
	}
	return true
}
