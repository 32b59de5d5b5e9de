package v1alpha1

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// apiIntBase is base, dual-stack, with api-int's own VIPs.
var apiIntBase = strings.Replace(base, "    vips: [198.51.100.5]\n",
	"    vips: [198.51.100.5, \"2001:db8::5\"]\n    internalVIPs: [198.51.100.4, \"2001:db8::4\"]\n    internalPort: 22623\n", 1)

// TestAPIIntValid: api-int's own instance comes after every other key,
// so that adding it to a running cluster renumbers nothing; the allowed
// sources default to the machine networks; the guarded ports are
// internalPort, haproxy's port for it and the machine config server's
// plain-HTTP port.
func TestAPIIntValid(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(apiIntBase))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"api", "ingress", "pool/a/0", "pool/a/1", "api-int"}
	if got := Strings(c.InstanceKeys()); !slices.Equal(got, want) {
		t.Errorf("InstanceKeys = %v, want %v", got, want)
	}
	if got, want := c.AllowedInternalSources(), []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/64")}; !slices.Equal(got, want) {
		t.Errorf("AllowedInternalSources = %v, want %v (the machine networks)", got, want)
	}
	if got, want := c.Spec.API.InternalPorts(), []int32{22623, 22625, 22624}; !slices.Equal(got, want) {
		t.Errorf("InternalPorts = %v, want %v", got, want)
	}
	given, err := Parse([]byte(strings.Replace(apiIntBase, "    internalPort: 22623\n", "    internalPort: 22623\n    internalAllowedSources: [198.51.100.0/25]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := given.AllowedInternalSources(), []netip.Prefix{netip.MustParsePrefix("198.51.100.0/25")}; !slices.Equal(got, want) {
		t.Errorf("AllowedInternalSources = %v, want %v (as given)", got, want)
	}
}

// TestAPIIntErrors pins every refusal of api-int's fields, path and all.
func TestAPIIntErrors(t *testing.T) {
	t.Parallel()
	runParseErrors(t, apiIntBase, []parseErrorCase{
		{
			name: "two api-int VIPs of one family",
			edit: replace(`internalVIPs: [198.51.100.4, "2001:db8::4"]`, `internalVIPs: [198.51.100.4, 198.51.100.3]`),
			want: []string{`spec.api.internalVIPs[1]: Invalid value: "198.51.100.3": a second IPv4 VIP; spec.api.internalVIPs[0] already has one (one VIP per family)`},
		},
		{
			name: "an api-int VIP of a family the API has none of",
			edit: replace(`vips: [198.51.100.5, "2001:db8::5"]`, `vips: [198.51.100.5]`),
			want: []string{`spec.api.internalVIPs[1]: Invalid value: "2001:db8::4": spec.api.vips has no IPv6 VIP: api-int serves the same API, in its families`},
		},
		{
			name: "an api-int VIP outside every machine network",
			edit: replace(`internalVIPs: [198.51.100.4,`, `internalVIPs: [203.0.113.4,`),
			want: []string{`spec.api.internalVIPs[0]: Invalid value: "203.0.113.4": outside every machine network (198.51.100.0/24, 2001:db8::/64)`},
		},
		{
			name: "the API VIP again",
			edit: replace(`internalVIPs: [198.51.100.4,`, `internalVIPs: [198.51.100.5,`),
			want: []string{`spec.api.internalVIPs[0]: Duplicate value: "198.51.100.5 (also spec.api.vips[0])"`},
		},
		{
			name: "an ingress VIP",
			edit: replace(`internalVIPs: [198.51.100.4,`, `internalVIPs: [198.51.100.6,`),
			want: []string{`spec.ingress[0].vips[0]: Duplicate value: "198.51.100.6 (also spec.api.internalVIPs[0])"`},
		},
		{
			name: "inside a service pool",
			edit: replace(`internalVIPs: [198.51.100.4,`, `internalVIPs: [198.51.100.130,`),
			want: []string{`spec.api.internalVIPs[0]: Invalid value: "198.51.100.130": inside service pool spec.servicePools[0].addresses[0]`},
		},
		{
			name: "not an address",
			edit: replace(`internalVIPs: [198.51.100.4,`, `internalVIPs: [api-int,`),
			want: []string{`spec.api.internalVIPs[0]: Invalid value: "api-int": invalid IP address`},
		},
		{
			name: "allowed sources: not a CIDR, host bits set",
			edit: replace("    internalPort: 22623\n", "    internalPort: 22623\n    internalAllowedSources: [198.51.100.0, 198.51.100.7/24, \"2001:db8::/129\"]\n"),
			want: []string{
				`spec.api.internalAllowedSources[0]: Invalid value: "198.51.100.0": invalid CIDR`,
				`spec.api.internalAllowedSources[1]: Invalid value: "198.51.100.7/24": invalid CIDR: host bits set, did you mean 198.51.100.0/24`,
				`spec.api.internalAllowedSources[2]: Invalid value: "2001:db8::/129": invalid CIDR`,
			},
		},
		{
			name: "allowed sources with nothing to guard",
			edit: func(s string) string {
				return strings.NewReplacer(
					"    internalVIPs: [198.51.100.4, \"2001:db8::4\"]\n", "",
					"    internalPort: 22623\n", "    internalAllowedSources: [198.51.100.0/24]\n").Replace(s)
			},
			want: []string{`spec.api.internalAllowedSources: Invalid value: ["198.51.100.0/24"]: set only together with internalPort or internalVIPs: without either there is nothing it would let in`},
		},
	})
}
