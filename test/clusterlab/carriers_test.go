package clusterlab

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestHostRouteHopsNamesEveryNextHop: the router's routes as netlink
// lists them: a two-way multipath host route in each family, a plain
// one, a blackhole and the connected prefix, which is no host route.
func TestHostRouteHopsNamesEveryNextHop(t *testing.T) {
	prefix := func(s string) *net.IPNet {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ip := net.ParseIP
	v4 := []netlink.Route{
		{Dst: prefix("198.51.100.0/24")},
		{Dst: prefix("198.51.100.160/32"), MultiPath: []*netlink.NexthopInfo{{Gw: ip("198.51.100.11")}, {Gw: ip("198.51.100.12")}}},
		{Dst: prefix("198.51.100.161/32"), Gw: ip("198.51.100.13")},
		{Dst: prefix("198.51.100.162/32"), Type: 6}, // RTN_BLACKHOLE
		{Gw: ip("198.51.100.1")}, // the default route
	}
	v6 := []netlink.Route{
		{Dst: prefix("2001:db8:300::/128"), MultiPath: []*netlink.NexthopInfo{{Gw: ip("2001:db8::11")}, {Gw: ip("2001:db8::12")}}},
		{Dst: prefix("2001:db8::/64")},
	}
	for _, c := range []struct {
		routes []netlink.Route
		bits   int
		want   map[string][]string
	}{
		{v4, 32, map[string][]string{"198.51.100.160": {"198.51.100.11", "198.51.100.12"}, "198.51.100.161": {"198.51.100.13"}, "198.51.100.162": nil}},
		{v6, 128, map[string][]string{"2001:db8:300::": {"2001:db8::11", "2001:db8::12"}}},
	} {
		got := hostRouteHops(c.routes, c.bits)
		if len(got) != len(c.want) {
			t.Errorf("host routes %v, want %v", got, c.want)
		}
		for dst, hops := range c.want {
			h, ok := got[netip.MustParseAddr(dst)]
			var names []string
			for _, a := range h {
				names = append(names, a.String())
			}
			if !ok || !slices.Equal(names, hops) {
				t.Errorf("%s: next hops %v (listed %t), want %v", dst, names, ok, hops)
			}
		}
	}
}
