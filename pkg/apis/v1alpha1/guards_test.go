package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

const wideWhy = "would let most of the internet fetch the cluster's secrets from the machine config server"

// TestInternalGuardNotDefeated: an allow-list in front of the machine
// config server that lets in most of the internet is refused, one entry
// or several together (issue 47, class 3).
func TestInternalGuardNotDefeated(t *testing.T) {
	t.Parallel()
	sources := func(list string) func(string) string {
		return replace("    internalPort: 22623\n", "    internalPort: 22623\n    internalAllowedSources: "+list+"\n")
	}
	runParseErrors(t, apiIntBase, exact([]parseErrorCase{
		{
			name: "the whole IPv4 internet",
			edit: sources("[0.0.0.0/0]"),
			want: []string{`spec.api.internalAllowedSources[0]: Invalid value: "0.0.0.0/0": wider than a /8: ` + wideWhy},
		},
		{
			name: "the whole IPv6 internet and all its unicast",
			edit: sources(`["::/0", "2000::/3", 198.51.100.0/24]`),
			want: []string{
				`spec.api.internalAllowedSources[0]: Invalid value: "::/0": wider than a /32: ` + wideWhy,
				`spec.api.internalAllowedSources[1]: Invalid value: "2000::/3": wider than a /32: ` + wideWhy,
			},
		},
		{
			name: "two /8s, each allowed, together too wide",
			edit: sources("[0.0.0.0/8, 10.0.0.0/8, 198.51.100.0/24]"),
			want: []string{`spec.api.internalAllowedSources: Invalid value: ["0.0.0.0/8","10.0.0.0/8","198.51.100.0/24"]: its IPv4 entries together let in more addresses than a /8: ` + wideWhy},
		},
		{
			name: "a /7 of private and public addresses",
			edit: sources("[10.0.0.0/7]"),
			want: []string{`spec.api.internalAllowedSources[0]: Invalid value: "10.0.0.0/7": wider than a /8: ` + wideWhy},
		},
		{
			name: "a machine network that wide stands in for the list",
			edit: func(s string) string {
				return strings.Replace(s, `machineNetworks: [198.51.100.0/24, "2001:db8::/64"]`, `machineNetworks: [192.0.0.0/2, "2001:db8::/64"]`, 1)
			},
			want: []string{`spec.machineNetworks[0]: Invalid value: "192.0.0.0/2": wider than a /8: ` + wideWhy + ` (this machine network is spec.api.internalAllowedSources' default: set that list to the subnets machines boot in)`},
		},
	}))
	for name, list := range map[string]string{
		"a whole private /8":             "[10.0.0.0/8]",
		"nested entries count once":      "[10.0.0.0/8, 10.1.0.0/16, 10.0.0.0/8]",
		"a site's IPv6 /32 and a subnet": `["2001:db8::/32", 198.51.100.0/24]`,
	} {
		if _, err := Parse([]byte(sources(list)(apiIntBase))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without the guard on there is nothing to defeat: a wide machine
	// network is no allow-list then.
	if _, err := Parse([]byte(strings.Replace(base, `machineNetworks: [198.51.100.0/24, "2001:db8::/64"]`, `machineNetworks: [192.0.0.0/2, "2001:db8::/64"]`, 1))); err != nil {
		t.Errorf("no guard: %v", err)
	}
}

// TestExternalIPsNeedNamespaces: a pool whose addresses Services may
// name in spec.externalIPs must say whose Services (CVE-2020-8554), in
// validate, render and update; the sidecar's parse of a live ConfigMap
// does not stop over it (issue 47, class 3).
func TestExternalIPsNeedNamespaces(t *testing.T) {
	t.Parallel()
	second := "    - name: b\n      addresses: [198.51.100.64/27]\n"
	for _, tc := range []struct {
		name  string
		pools string
		want  []string
	}{
		{
			name:  "open to every namespace",
			pools: "      externalIPs: true\n",
			want:  []string{`spec.servicePools[0].namespaces: Required value: externalIPs: true lets Services of these namespaces claim the pool's addresses in spec.externalIPs; without namespaces every tenant could (CVE-2020-8554)`},
		},
		{
			name:  "the second pool open, the first closed",
			pools: "      namespaces: [web]\n      externalIPs: true\n" + second + "      externalIPs: true\n",
			want:  []string{`spec.servicePools[1].namespaces: Required value: externalIPs: true lets Services of these namespaces claim the pool's addresses in spec.externalIPs; without namespaces every tenant could (CVE-2020-8554)`},
		},
		{name: "namespaces named", pools: "      externalIPs: true\n      namespaces: [web, team]\n"},
		{name: "no externalIPs, no namespaces", pools: second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(base + tc.pools))
			if err != nil {
				t.Fatalf("Parse (the sidecar's) refused it: %v", err)
			}
			var got []string
			for _, e := range ValidateNodes(c, nil) {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
