package frr

import (
	"slices"
	"strings"
	"testing"
)

// conf is frr.conf as pkg/render writes it (abridged), with v4 and v6
// the `network` lines of each address family.
func conf(v4, v6 []string, timers string) []byte {
	var b strings.Builder
	b.WriteString("frr defaults traditional\nhostname master-0\n!\nroute-map vipctl-in deny 10\nexit\n!\n")
	b.WriteString("router bgp 64513\n bgp router-id 198.51.100.11\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 timers " + timers + "\n !\n")
	b.WriteString(" address-family ipv4 unicast\n")
	for _, n := range v4 {
		b.WriteString("  network " + n + "\n")
	}
	b.WriteString("  neighbor 198.51.100.1 activate\n exit-address-family\n !\n address-family ipv6 unicast\n")
	for _, n := range v6 {
		b.WriteString("  network " + n + "\n")
	}
	b.WriteString("  neighbor 2001:db8:100::1 activate\n exit-address-family\nexit\n!\n")
	return []byte(b.String())
}

func TestNetworkDelta(t *testing.T) {
	base := conf([]string{"203.0.113.240/32"}, []string{"2001:db8:300::/128"}, "1 3")
	for _, tc := range []struct {
		name string
		old  []byte
		new  []byte
		ok   bool
		want []string
	}{
		{"unknown old", nil, base, false, nil},
		{"unchanged", base, base, true, nil},
		{"one added", base, conf([]string{"203.0.113.240/32", "203.0.113.241/32"}, []string{"2001:db8:300::/128"}, "1 3"), true,
			[]string{"configure terminal", "router bgp 64513", "address-family ipv4 unicast", "network 203.0.113.241/32", "end"}},
		{"withdrawn in both families", base, conf(nil, nil, "1 3"), true,
			[]string{"configure terminal", "router bgp 64513", "address-family ipv4 unicast", "no network 203.0.113.240/32",
				"exit-address-family", "address-family ipv6 unicast", "no network 2001:db8:300::/128", "end"}},
		{"moved: withdrawn first", base, conf([]string{"203.0.113.242/32"}, []string{"2001:db8:300::/128"}, "1 3"), true,
			[]string{"configure terminal", "router bgp 64513", "address-family ipv4 unicast", "no network 203.0.113.240/32", "network 203.0.113.242/32", "end"}},
		{"a timer changed too", base, conf([]string{"203.0.113.241/32"}, nil, "3 9"), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := networkDelta(tc.old, tc.new)
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("networkDelta = %q, %t; want %q, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}
