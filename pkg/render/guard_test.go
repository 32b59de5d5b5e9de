package render

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestInternalGuard: the guard closes internalPort, haproxy's port for it
// and the machine config server's plain port on every address, and every
// port of api-int's own VIPs, to all but the machine networks (or
// spec.api.internalAllowedSources), every node's addresses in both
// families and the bootstrap host's; a config that serves no internal API
// guards nothing.
func TestInternalGuard(t *testing.T) {
	t.Parallel()
	prefixes := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	cases := []struct {
		example string
		// allowed is spec.api.internalAllowedSources; outside the
		// machine network, the nodes' own addresses stand out
		// (compact.yaml: .11-.13, 2001:db8:100::11-13, both families
		// whatever the config's).
		allowed []string
		want    onnode.InternalGuard
	}{
		{
			example: "api-int.yaml",
			want: onnode.InternalGuard{
				Ports: []uint16{22623, 22625, 22624},
				VIPs:  []netip.Addr{netip.MustParseAddr("198.51.100.4"), netip.MustParseAddr("2001:db8:100::4")},
				Allowed: prefixes("198.51.100.0/24", "198.51.100.11/32", "198.51.100.12/32", "198.51.100.13/32",
					"2001:db8:100::/64", "2001:db8:100::11/128", "2001:db8:100::12/128", "2001:db8:100::13/128"),
			},
		},
		{
			example: "api-int.yaml",
			allowed: []string{"203.0.113.0/24"},
			want: onnode.InternalGuard{
				Ports: []uint16{22623, 22625, 22624},
				VIPs:  []netip.Addr{netip.MustParseAddr("198.51.100.4"), netip.MustParseAddr("2001:db8:100::4")},
				Allowed: prefixes("198.51.100.11/32", "198.51.100.12/32", "198.51.100.13/32", "203.0.113.0/24",
					"2001:db8:100::11/128", "2001:db8:100::12/128", "2001:db8:100::13/128"),
			},
		},
		{
			// The bootstrap host, whose machine config server hands the
			// control plane its first Ignition, is let in too.
			example: "day1-bootstrap.yaml",
			allowed: []string{"203.0.113.0/24"},
			want: onnode.InternalGuard{
				Ports: []uint16{22623, 22625, 22624},
				Allowed: prefixes("198.51.100.9/32", "198.51.100.11/32", "198.51.100.12/32", "198.51.100.13/32", "203.0.113.0/24",
					"2001:db8:100::11/128", "2001:db8:100::12/128", "2001:db8:100::13/128"),
			},
		},
	}
	for _, tc := range cases {
		r := renderExample(t, tc.example)
		c := *r.config
		c.Spec.API.InternalAllowedSources = tc.allowed
		st := cluster.State{Nodes: r.nodes}
		p, err := NewPlan(cluster.Compile(&c), testIDs(&c), st)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := p.InternalGuard()
		if !ok {
			t.Fatalf("%s: no guard", tc.example)
		}
		if !slices.Equal(got.Ports, tc.want.Ports) || !slices.Equal(got.VIPs, tc.want.VIPs) {
			t.Errorf("%s %v: ports %v, VIPs %v; want %v, %v", tc.example, tc.allowed, got.Ports, got.VIPs, tc.want.Ports, tc.want.VIPs)
		}
		if !slices.Equal(got.Allowed, tc.want.Allowed) {
			t.Errorf("%s %v: allowed\n  %v\nwant\n  %v", tc.example, tc.allowed, got.Allowed, tc.want.Allowed)
		}
	}
	r := renderExample(t, "dual-stack.yaml")
	if g, ok := r.plan.InternalGuard(); ok {
		t.Errorf("dual-stack.yaml serves no internal API, yet guards %+v", g)
	}
}
