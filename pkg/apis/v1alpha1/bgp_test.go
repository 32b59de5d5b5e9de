package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

const bgpBase = base + `    - name: racks
      mode: bgp
      addresses: [203.0.113.192/28, "2001:db8:f::/124"]
  bgp:
    asn: 64513
    communities: ["64512:100", no-export]
    peers:
      - address: 198.51.100.1
        asn: 64512
        bfd: true
        nodeSelector: {rack: r1}
      - address: 203.0.113.1
        asn: 64512
        holdTime: 30s
      - address: "2001:db8::1"
        asn: 64512
`

// TestBGPPoolDefaults: a bgp pool takes no VRRP instance (so no VRRP ID)
// and no anchor, may lie outside the machine networks, and its peers get
// the 9s/3s timers unless they name their own.
func TestBGPPoolDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(bgpBase))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Strings(c.InstanceKeys()), " "); got != "api ingress pool/a/0 pool/a/1" {
		t.Errorf("InstanceKeys = %s: a bgp pool must take no VRRP instance", got)
	}
	racks := c.Spec.ServicePools[1]
	if !racks.IsBGP() || c.Spec.ServicePools[0].Mode != PoolModeVRRP {
		t.Errorf("modes = %q, %q", c.Spec.ServicePools[0].Mode, racks.Mode)
	}
	if a := racks.Anchors(true); len(a) != 0 {
		t.Errorf("bgp pool anchors = %v, want none", a)
	}
	for i, want := range [][2]int{{9, 3}, {30, 10}} {
		if h, k := c.Spec.BGP.Peers[i].Timers(); h != want[0] || k != want[1] {
			t.Errorf("peer %d timers = %d/%d, want %d/%d", i, h, k, want[0], want[1])
		}
	}
	if got := BGPKey("racks"); got != "bgp/racks" {
		t.Errorf("BGPKey = %s", got)
	}
	if p, ok := BGPKey("racks").BGPPool(); !ok || p != "racks" {
		t.Errorf("BGPPool = %q, %v", p, ok)
	}
	if _, _, ok := BGPKey("racks").Pool(); ok {
		t.Error("a bgp key must not read as a VRRP pool instance")
	}
}

func TestBGPErrors(t *testing.T) {
	t.Parallel()
	cases := []parseErrorCase{
		{
			name: "unknown mode",
			edit: replace("mode: bgp", "mode: ospf"),
			want: []string{`spec.servicePools[1].mode: Unsupported value: "ospf": supported values: "vrrp", "bgp"`},
		},
		{
			name: "announce on a bgp pool",
			edit: replace("      mode: bgp\n", "      mode: bgp\n      announce: sidecar\n"),
			want: []string{`spec.servicePools[1].announce: Invalid value: "sidecar": only for mode vrrp: a bgp pool's routes are announced by FRR`},
		},
		{
			name: "bgp pool without spec.bgp",
			edit: func(s string) string { before, _, _ := strings.Cut(s, "  bgp:\n"); return before },
			want: []string{`spec.bgp: Required value: spec.servicePools[1] has mode bgp: name the nodes' ASN and their peers`},
		},
		{
			name: "every peer error at once, with its path",
			edit: func(s string) string {
				return strings.NewReplacer(
					"asn: 64513", "asn: 0",
					"address: 198.51.100.1\n", "address: 198.51.100.300\n",
					"holdTime: 30s", "holdTime: 2s\n        keepaliveTime: 1500ms",
					"no-export", "70000:1",
					"rack: r1", "rack: \"a b\"",
				).Replace(s)
			},
			want: []string{
				`spec.bgp.asn: Required value: the nodes' AS number (1-4294967295; private: 64512-65534, 4200000000-4294967294)`,
				`spec.bgp.peers[0].address: Invalid value: "198.51.100.300"`,
				`spec.bgp.peers[0].nodeSelector[rack]: Invalid value: "a b"`,
				`spec.bgp.peers[1].holdTime: Invalid value: "2s": must be at least 3s (RFC 4271)`,
				`spec.bgp.peers[1].keepaliveTime: Invalid value: "1500ms": must be whole seconds, at most 65535s`,
				`spec.bgp.communities[1]: Invalid value: "70000:1": must be AA:NN (each 0-65535) or one of no-export, no-advertise, local-AS`,
			},
		},
		{
			name: "keepalive not below hold; duplicate peer",
			edit: replace("holdTime: 30s", "holdTime: 30s\n        keepaliveTime: 30s\n      - address: 203.0.113.1\n        asn: 64512"),
			want: []string{
				`spec.bgp.peers[1].keepaliveTime: Invalid value: "30s": must be less than holdTime 30s`,
				`spec.bgp.peers[2].address: Duplicate value: "203.0.113.1 (also spec.bgp.peers[1].address)"`,
			},
		},
		{
			name: "an IPv6 range with only IPv4 peers would be announced nowhere",
			edit: replace("      - address: \"2001:db8::1\"\n        asn: 64512\n", ""),
			want: []string{`spec.servicePools[1].addresses[1]: Invalid value: "2001:db8:f::/124": no IPv6 peer in spec.bgp.peers to announce it to`},
		},
		{
			name: "ebgpMultihop of 1, and on an iBGP peer",
			edit: replace("holdTime: 30s", "holdTime: 30s\n        ebgpMultihop: 1\n      - address: 198.51.100.9\n        asn: 64513\n        ebgpMultihop: 3"),
			want: []string{
				`spec.bgp.peers[1].ebgpMultihop: Invalid value: 1: must be 2 to 255`,
				`spec.bgp.peers[2].ebgpMultihop: Invalid value: 3: only for eBGP`,
			},
		},
		{
			name: "unnumbered peers: neither address nor interface, both, a bad name, an address as a name, multihop, one link twice",
			edit: replace("holdTime: 30s", `holdTime: 30s
      - asn: 64512
      - address: 198.51.100.9
        interface: eth1
        asn: 64512
      - interface: eth1/2
        asn: 64512
      - interface: 198.51.100.7
        asn: 64512
      - interface: eth2
        asn: 64512
        ebgpMultihop: 2
      - interface: eth2
        asn: 64514
      - interface: eth3
        asn: 64512
        dualStack: true`),
			want: []string{
				`spec.bgp.peers[2].address: Required value: the router's address, or its interface for an unnumbered session`,
				`spec.bgp.peers[3].interface: Invalid value: "eth1": name the router by address or by interface, not both`,
				`spec.bgp.peers[4].interface: Invalid value: "eth1/2": must be a network interface name`,
				`spec.bgp.peers[5].interface: Invalid value: "198.51.100.7": an address, not an interface`,
				`spec.bgp.peers[6].ebgpMultihop: Invalid value: 2: an unnumbered peer is on the link`,
				`spec.bgp.peers[7].interface: Duplicate value: "eth2 (also spec.bgp.peers[6].interface, for the same nodes)"`,
				`spec.bgp.peers[8].dualStack: Invalid value: true: an unnumbered session carries both families already`,
			},
		},
		{
			name: "a passwordSecret that names no Secret",
			edit: replace("holdTime: 30s", "holdTime: 30s\n        passwordSecret: Rack_A"),
			want: []string{`spec.bgp.peers[1].passwordSecret: Invalid value: "Rack_A"`},
		},
		{
			name: "a pool's bgp policy, every error with its path",
			edit: replace("      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n", `      addresses: [203.0.113.192/28, "2001:db8:f::/124"]
      bgp:
        peers: [198.51.100.1, 198.51.100.9, bad/x, eth9]
        communities: ["1:70000"]
        largeCommunities: ["1:2", "4294967296:0:0", "4200000000:1:2"]
        localPref: 200
        asPathPrepend: 11
        aggregationLength: 24
        aggregationLengthV6: 129
`),
			want: []string{
				`spec.servicePools[1].bgp.peers[1]: Not found: "198.51.100.9 is no peer of spec.bgp.peers"`,
				`spec.servicePools[1].bgp.peers[2]: Invalid value: "bad/x": invalid IP address, nor an unnumbered peer's interface`,
				`spec.servicePools[1].bgp.peers[3]: Not found: "eth9 is no peer of spec.bgp.peers"`,
				`spec.servicePools[1].bgp.communities[0]: Invalid value: "1:70000"`,
				`spec.servicePools[1].bgp.largeCommunities[0]: Invalid value: "1:2": must be GLOBAL:LOCAL1:LOCAL2`,
				`spec.servicePools[1].bgp.largeCommunities[1]: Invalid value: "4294967296:0:0"`,
				`spec.servicePools[1].bgp.localPref: Invalid value: 200: reaches iBGP peers alone`,
				`spec.servicePools[1].bgp.asPathPrepend: Invalid value: 11: must be 0 to 10`,
				`spec.servicePools[1].bgp.aggregationLength: Invalid value: 24: the pool's 203.0.113.192/28 holds 203.0.113.192/28, a /28`,
				`spec.servicePools[1].bgp.aggregationLengthV6: Invalid value: 129: must be 1 to 128`,
			},
		},
		{
			name: "a pool's bgp.peers leave its IPv6 addresses unannounced",
			edit: replace("      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n",
				"      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n      bgp: {peers: [198.51.100.1]}\n"),
			want: []string{`spec.servicePools[1].bgp.peers: Invalid value: ["198.51.100.1"]: no IPv6 peer among them to announce the pool's 2001:db8:f::/124 to`},
		},
		{
			name: "a bgp policy on a vrrp pool; localPref with an iBGP peer is fine",
			edit: func(s string) string {
				return strings.NewReplacer("    - name: a\n", "    - name: a\n      bgp: {asPathPrepend: 1}\n",
					"      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n",
					"      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n      bgp: {localPref: 50, asPathPrepend: 1}\n",
					"        asn: 64512\n        holdTime: 30s", "        asn: 64513\n        holdTime: 30s").Replace(s)
			},
			want: []string{`spec.servicePools[0].bgp: Forbidden: only for mode bgp`,
				`spec.servicePools[1].bgp.asPathPrepend: Invalid value: 1: an iBGP peer among the pool's peers would drop the routes`},
		},
		{
			name: "localPref 0 is the backup routes'",
			edit: func(s string) string {
				return strings.NewReplacer("      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n",
					"      addresses: [203.0.113.192/28, \"2001:db8:f::/124\"]\n      bgp: {localPref: 0}\n",
					"        asn: 64512\n        holdTime: 30s", "        asn: 64513\n        holdTime: 30s").Replace(s)
			},
			want: []string{`spec.servicePools[1].bgp.localPref: Invalid value: 0: must be at least 1: backup routes go to iBGP peers at 0`},
		},
		{
			name: "a graceful restart time out of RFC 4724's range",
			edit: replace("    asn: 64513\n", "    asn: 64513\n    gracefulRestartTime: 4096s\n"),
			want: []string{`spec.bgp.gracefulRestartTime: Invalid value: "4096s": must be whole seconds, 1s to 4095s`},
		},
		{
			name: "a vrrp pool still must sit in a machine network",
			edit: replace("      mode: bgp\n", ""),
			want: []string{`spec.servicePools[1].addresses[0]: Invalid value: "203.0.113.192/28": not inside one machine network`},
		},
	}
	runParseErrors(t, bgpBase, cases)
}

// TestCheckBGPPassword: what a passwordSecret's password may be, as FRR
// and Linux take it.
func TestCheckBGPPassword(t *testing.T) {
	t.Parallel()
	for pw, ok := range map[string]bool{
		"s3cret!x": true, strings.Repeat("a", MaxBGPPasswordLen): true,
		"": false, strings.Repeat("a", MaxBGPPasswordLen+1): false, "two words": false, "tab\there": false, "newline\n": false, "caf\xc3\xa9": false,
	} {
		if got := CheckBGPPassword([]byte(pw)) == ""; got != ok {
			t.Errorf("%q: accepted %v, want %v (%s)", pw, got, ok, CheckBGPPassword([]byte(pw)))
		}
	}
}

// TestBGPPasswordSecrets: each Secret the peers name, once, sorted.
func TestBGPPasswordSecrets(t *testing.T) {
	t.Parallel()
	c := &ClusterVIPs{Spec: ClusterVIPsSpec{BGP: &BGPSpec{Peers: []BGPPeer{
		{Address: "198.51.100.1", PasswordSecret: "rack-b"}, {Address: "198.51.100.2"}, {Address: "198.51.100.3", PasswordSecret: "rack-a"}, {Address: "198.51.100.4", PasswordSecret: "rack-b"},
	}}}}
	if got := c.BGPPasswordSecrets(); !slices.Equal(got, []string{"rack-a", "rack-b"}) {
		t.Errorf("BGPPasswordSecrets = %v, want [rack-a rack-b]", got)
	}
	if got := (&ClusterVIPs{}).BGPPasswordSecrets(); got != nil {
		t.Errorf("no spec.bgp: %v", got)
	}
}

// TestBGPOneSessionBothFamilies: a pool's IPv6 addresses need no IPv6
// peer when an IPv4 peer is dualStack, or the peer is unnumbered: the
// session carries them; without either they are refused.
func TestBGPOneSessionBothFamilies(t *testing.T) {
	t.Parallel()
	v4only := strings.Replace(bgpBase, "      - address: \"2001:db8::1\"\n        asn: 64512\n", "", 1)
	if _, err := Parse([]byte(v4only)); err == nil || !strings.Contains(err.Error(), "no IPv6 peer in spec.bgp.peers") {
		t.Fatalf("IPv6 pool addresses with IPv4 peers alone: %v, want refused", err)
	}
	for _, edit := range []struct{ name, from, to string }{
		{"dualStack", "holdTime: 30s", "holdTime: 30s\n        dualStack: true"},
		{"unnumbered", "      - address: 203.0.113.1\n", "      - interface: eno2\n"},
	} {
		if _, err := Parse([]byte(strings.Replace(v4only, edit.from, edit.to, 1))); err != nil {
			t.Errorf("%s: %v", edit.name, err)
		}
	}
}

// TestRoutedAPI: spec.api.routed lets the API VIP lie outside every
// machine network, with spec.bgp and VRRP unicast; it is refused without
// spec.bgp and with multicast, each at its field.
func TestRoutedAPI(t *testing.T) {
	t.Parallel()
	routed := strings.Replace(bgpBase, "    vips: [198.51.100.5]\n", "    vips: [203.0.113.150]\n    routed: true\n", 1)
	if _, err := Parse([]byte(routed)); err != nil {
		t.Fatalf("a routed API VIP outside the machine networks: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(routed, "    routed: true\n", "", 1))); err == nil || !strings.Contains(err.Error(), "spec.api.vips[0]: Invalid value: \"203.0.113.150\": outside every machine network") {
		t.Errorf("the same VIP not routed: %v, want refused at spec.api.vips[0]", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"no spec.bgp", "  bgp:\n", "  nobgp:\n", "spec.bgp: Required value: spec.api.routed"},
		{"multicast", "  api:\n", "  vrrp: {mode: multicast}\n  api:\n", "spec.vrrp.mode: Invalid value: \"multicast\": spec.api.routed needs unicast"},
	} {
		src := strings.Replace(routed, tc.from, tc.to, 1)
		if tc.name == "no spec.bgp" {
			src, _, _ = strings.Cut(routed, "  bgp:\n")
			src = strings.Replace(src, "      mode: bgp\n", "", 1)
		}
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRoutedAPIBootstrap: a routed API VIP's bootstrap host peers with the
// routers whose nodeSelector its labels match (a control-plane node's
// role labels by default); spec.bootstrap.labels is refused without
// spec.api.routed, when it selects no peer or an unnumbered one, and the
// host's address must lie in a machine network (not the VIP's: it has
// none). A peer with a password is accepted: vipctl bootstrap is given
// its Secret (pkg/bootstrap).
func TestRoutedAPIBootstrap(t *testing.T) {
	t.Parallel()
	routed := strings.Replace(bgpBase, "    vips: [198.51.100.5]\n", "    vips: [203.0.113.150]\n    routed: true\n", 1)
	routed = strings.Replace(routed, "  api:\n", "  bootstrap: {addresses: [198.51.100.40]}\n  api:\n", 1)
	if _, err := Parse([]byte(routed)); err != nil {
		t.Fatalf("a routed API VIP with a bootstrap host: %v", err)
	}
	withPassword := strings.Replace(routed, "        asn: 64512\n", "        asn: 64512\n        passwordSecret: tor-md5\n", 1)
	if c, err := Parse([]byte(withPassword)); err != nil || c.Spec.BGP.Peers[0].PasswordSecret != "tor-md5" {
		t.Fatalf("a routed API VIP whose bootstrap host peers with a password: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *ClusterVIPs)
		want string
	}{
		{"labels without a routed API", func(c *ClusterVIPs) {
			c.Spec.API.Routed = false
			c.Spec.API.VIPs = []string{"198.51.100.5"}
			c.Spec.Bootstrap.Labels = map[string]string{"rack": "r1"}
		}, "spec.bootstrap.labels: Forbidden: only with spec.api.routed"},
		{"a bad label key", func(c *ClusterVIPs) { c.Spec.Bootstrap.Labels = map[string]string{"-rack": "r1"} }, "spec.bootstrap.labels[-rack]"},
		{"no peer for the bootstrap host", func(c *ClusterVIPs) {
			for i := range c.Spec.BGP.Peers {
				c.Spec.BGP.Peers[i].NodeSelector = map[string]string{"rack": "r1"}
			}
		}, "spec.bootstrap.labels: Invalid value: {\"node-role.kubernetes.io/control-plane\":\"\",\"node-role.kubernetes.io/master\":\"\"}: (unset: a control-plane node's role labels) select no peer of spec.bgp.peers"},
		{"an unnumbered peer", func(c *ClusterVIPs) {
			c.Spec.BGP.Peers[0].Address, c.Spec.BGP.Peers[0].Interface = "", "eno2"
			c.Spec.Bootstrap.Labels = map[string]string{"rack": "r1"}
		}, "select spec.bgp.peers[0], an unnumbered peer (interface eno2)"},
		{"an address outside the machine networks", func(c *ClusterVIPs) {
			c.Spec.Bootstrap.Addresses = []string{"203.0.113.40"}
		}, "spec.bootstrap.addresses[0]: Invalid value: \"203.0.113.40\": outside every machine network"},
	} {
		c, err := Parse([]byte(routed))
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(c)
		if errs := Validate(c); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
}
