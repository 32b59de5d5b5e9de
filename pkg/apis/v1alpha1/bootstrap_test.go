package v1alpha1

import (
	"net/netip"
	"strings"
	"testing"
)

// TestBootstrapErrors pins what spec.bootstrap refuses, with its paths:
// the host must speak VRRP in every family's API instance, on that
// instance's segment, from an address that is neither a VIP nor a node's.
func TestBootstrapErrors(t *testing.T) {
	t.Parallel()
	doc := base + "  bootstrap:\n    addresses: [198.51.100.9]\n"
	if _, err := Parse([]byte(doc)); err != nil {
		t.Fatalf("a valid bootstrap host: %v", err)
	}
	cases := []parseErrorCase{
		{
			name: "no address",
			edit: replace("addresses: [198.51.100.9]", "addresses: []"),
			want: []string{`spec.bootstrap.addresses: Required value: the bootstrap host's own address, one per IP family of spec.api.vips`},
		},
		{
			name: "not an address",
			edit: replace("addresses: [198.51.100.9]", "addresses: [198.51.100.300]"),
			want: []string{`spec.bootstrap.addresses[0]: Invalid value: "198.51.100.300"`},
		},
		{
			name: "two of one family",
			edit: replace("addresses: [198.51.100.9]", "addresses: [198.51.100.9, 198.51.100.10]"),
			want: []string{`spec.bootstrap.addresses[1]: Invalid value: "198.51.100.10": a second IPv4 address; spec.bootstrap.addresses[0] already is one (one per family)`},
		},
		{
			name: "a family without an API VIP",
			edit: replace("addresses: [198.51.100.9]", `addresses: [198.51.100.9, "2001:db8::9"]`),
			want: []string{`spec.bootstrap.addresses[1]: Invalid value: "2001:db8::9": spec.api.vips has no IPv6 VIP for the bootstrap host to hold`},
		},
		{
			name: "an API VIP family without an address",
			edit: func(s string) string {
				return strings.NewReplacer("vips: [198.51.100.5]", `vips: [198.51.100.5, "2001:db8::5"]`).Replace(s)
			},
			want: []string{`spec.bootstrap.addresses: Required value: an IPv6 address: the bootstrap host speaks VRRP for the IPv6 API VIP 2001:db8::5 from it`},
		},
		{
			name: "off the API VIP's segment",
			edit: func(s string) string {
				return strings.NewReplacer("[198.51.100.0/24,", "[198.51.100.0/24, 203.0.113.0/24,", "addresses: [198.51.100.9]", "addresses: [203.0.113.9]").Replace(s)
			},
			want: []string{`spec.bootstrap.addresses[0]: Invalid value: "203.0.113.9": outside machine network 198.51.100.0/24 of the IPv4 API VIP 198.51.100.5: VRRP reaches only that segment`},
		},
		{
			name: "a VIP",
			edit: replace("addresses: [198.51.100.9]", "addresses: [198.51.100.6]"),
			want: []string{`spec.ingress[0].vips[0]: Invalid value: "198.51.100.6": is the address of the bootstrap host (spec.bootstrap.addresses[0])`},
		},
	}
	runParseErrors(t, doc, cases)
}

// TestBootstrapNotANode: with the nodes known, a bootstrap address that a
// worker has is refused; a control-plane node's is the in-place bootstrap
// of the agent-based installer (its rendezvous host reboots into that
// node) and is accepted. A pool holding the address is refused either way
// (a Service given it would take the host's traffic), once for the one
// host.
func TestBootstrapNotANode(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(base, "[198.51.100.128/26]", "[198.51.100.128/26, 198.51.100.192/27]", 1) + "  bootstrap:\n    addresses: [198.51.100.200]\n"
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	addr := []netip.Addr{netip.MustParseAddr("198.51.100.200")}
	cases := []struct {
		name  string
		nodes []NodeAddresses
		want  []string
	}{
		{
			name:  "a worker's address",
			nodes: []NodeAddresses{{Name: "master-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}, ControlPlane: true}, {Name: "worker-0", Addresses: addr}},
			want: []string{
				`spec.bootstrap.addresses[0]: Invalid value: "198.51.100.200": is the address of node worker-0, which is no control-plane node: only a control-plane node's host bootstraps in place (the agent-based installer's rendezvous host); a worker never holds the API VIP`,
				`spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.192/27": contains 198.51.100.200, the address of the bootstrap host (spec.bootstrap.addresses[0]) and of node worker-0, which must never be handed out`,
			},
		},
		{
			name:  "in place: a control-plane node's address",
			nodes: []NodeAddresses{{Name: "master-0", Addresses: addr, ControlPlane: true}},
			want: []string{
				`spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.192/27": contains 198.51.100.200, the address of the bootstrap host (spec.bootstrap.addresses[0]) and of node master-0, which must never be handed out`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ValidateNodes(c, tc.nodes)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(got), len(tc.want), got)
			}
			for i := range tc.want {
				if got[i].Error() != tc.want[i] {
					t.Errorf("error %d:\n  got  %s\n  want %s", i, got[i], tc.want[i])
				}
			}
		})
	}
	// Without a pool over it, the in-place bootstrap is valid.
	clean, err := Parse([]byte(base + "  bootstrap:\n    addresses: [198.51.100.200]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if errs := ValidateNodes(clean, []NodeAddresses{{Name: "master-0", Addresses: addr, ControlPlane: true}}); len(errs) > 0 {
		t.Errorf("in place: %v", errs)
	}
}
