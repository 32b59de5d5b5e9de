package v1alpha1

import (
	"strings"
	"testing"
)

// TestOwnInterfaceValid: a pool and an IngressController on an interface
// of their own may lie outside every machine network; the interface is
// named or taken from a node label.
func TestOwnInterfaceValid(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(base, "      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n    - name: dmz\n      domain: dmz.example.test\n      vips: [203.0.113.100]\n      interfaceLabel: example.com/dmz-nic\n", 1)
	doc = strings.Replace(doc, "      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: dmz\n      interface: bond0.100\n      addresses: [203.0.113.0/26, \"2001:db8:200::/120\"]\n", 1)
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasOwnInterfaces() {
		t.Error("HasOwnInterfaces = false")
	}
	if got, why := c.Spec.ServicePools[1].VIPInterface().On(nil); got != "bond0.100" || why != "" {
		t.Errorf("pool interface = %q (%s)", got, why)
	}
	on := c.Spec.Ingress[1].VIPInterface()
	if got, why := on.On(map[string]string{"example.com/dmz-nic": "eno2"}); got != "eno2" || why != "" {
		t.Errorf("labelled interface = %q (%s)", got, why)
	}
	if _, why := on.On(map[string]string{"example.com/dmz-nic": "a-name-longer-than-15"}); why == "" {
		t.Error("a label value that is no interface name was taken")
	}
	if _, why := on.On(nil); why != "no label example.com/dmz-nic" {
		t.Errorf("missing label: %q", why)
	}
}

func TestOwnInterfaceErrors(t *testing.T) {
	t.Parallel()
	pool := func(fields string) func(string) string {
		return replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: dmz\n"+fields)
	}
	runParseErrors(t, base, []parseErrorCase{
		{
			name: "both interface and label",
			edit: pool("      interface: br-dmz\n      interfaceLabel: example.com/nic\n      addresses: [203.0.113.0/26]\n"),
			want: []string{`spec.servicePools[1].interfaceLabel: Invalid value: "example.com/nic": set interface or interfaceLabel, not both`},
		},
		{
			name: "interface name that could inject",
			edit: pool("      interface: \"br-dmz\\n}\"\n      addresses: [203.0.113.0/26]\n"),
			want: []string{`spec.servicePools[1].interface: Invalid value: "br-dmz\n}": must be a network interface name`},
		},
		{
			name: "label key invalid",
			edit: pool("      interfaceLabel: \"bad key!\"\n      addresses: [203.0.113.0/26]\n"),
			want: []string{`spec.servicePools[1].interfaceLabel: Invalid value: "bad key!"`},
		},
		{
			name: "bgp pool",
			edit: pool("      mode: bgp\n      interface: br-dmz\n      addresses: [203.0.113.0/26]\n"),
			want: []string{`spec.servicePools[1].interface: Invalid value: "br-dmz": only for mode vrrp`},
		},
		{
			name: "sidecar-announced pool",
			edit: pool("      announce: sidecar\n      interface: br-dmz\n      addresses: [203.0.113.0/26]\n"),
			want: []string{`spec.servicePools[1].interface: Invalid value: "br-dmz": only with announce: keepalived`},
		},
		{
			name: "no machine network of the family",
			edit: func(s string) string {
				s = strings.Replace(s, `machineNetworks: [198.51.100.0/24, "2001:db8::/64"]`, `machineNetworks: [198.51.100.0/24]`, 1)
				return pool("      interface: br-dmz\n      addresses: [\"2001:db8:200::/120\"]\n")(s)
			},
			want: []string{`spec.servicePools[1].interface: Invalid value: "br-dmz": VRRP for the IPv6 VIPs speaks from the nodes' address in a machine network of that family, and spec.machineNetworks has no IPv6 network`},
		},
		{
			name: "ingress VIP outside the machine networks without an interface",
			edit: replace("vips: [198.51.100.6]", "vips: [203.0.113.6]"),
			want: []string{`spec.ingress[0].vips[0]: Invalid value: "203.0.113.6": outside every machine network`},
		},
		{
			name: "pool outside the machine networks without an interface",
			edit: pool("      addresses: [203.0.113.0/26]\n"),
			want: []string{`(set interface for another one)`},
		},
	})
}
