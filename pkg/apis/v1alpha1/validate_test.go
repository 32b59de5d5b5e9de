package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

const base = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: ostest
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8::/64"]
  api:
    vips: [198.51.100.5]
  ingress:
    - name: default
      vips: [198.51.100.6]
  servicePools:
    - name: a
      addresses: [198.51.100.128/26]
`

func TestParseValid(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Spec.Ingress[0].Domain; got != "apps.ostest.example.test" {
		t.Errorf("default ingress domain = %q", got)
	}
	if got := c.Spec.VRRP; got.Mode != ModeUnicast || got.Version != 2 || got.AdvertInterval != "1s" || got.Interface != "br-ex" {
		t.Errorf("vrrp defaults = %+v", got)
	}
	if got := c.Spec.ServicePools[0]; got.Instances != 2 || !got.IsAutoAssign() || got.SidecarAnnounced() {
		t.Errorf("pool defaults = %+v", got)
	}
	// The oldest supported release, so that the default output is accepted
	// by every supported one.
	if got := c.Spec.OpenShiftRelease; got != "4.14" {
		t.Errorf("default openshiftRelease = %q, want 4.14", got)
	}
	want := []string{"api", "ingress", "pool/a/0", "pool/a/1"}
	if got := Strings(c.InstanceKeys()); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("InstanceKeys = %v, want %v", got, want)
	}
}

// TestParseErrors pins the exact message of every error, path included:
// users grep for these, and a changed path is a changed contract.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []parseErrorCase{
		{
			name: "unknown field is named with its path",
			edit: replace("  baseDomain:", "  bogus: 1\n  baseDomain:"),
			want: []string{`spec.bogus: Invalid value: unknown field`},
		},
		{
			name: "duplicate field",
			edit: replace("  baseDomain: example.test", "  baseDomain: example.test\n  baseDomain: x.test"),
			want: []string{`not valid YAML`},
		},
		{
			name: "wrong kind and apiVersion",
			edit: func(s string) string {
				return strings.NewReplacer("kind: ClusterVIPs", "kind: Cluster", "vipctl.io/v1alpha1", "vipctl.io/v1").Replace(s)
			},
			want: []string{
				`apiVersion: Unsupported value: "vipctl.io/v1": supported values: "vipctl.io/v1alpha1"`,
				`kind: Unsupported value: "Cluster": supported values: "ClusterVIPs"`,
			},
		},
		{
			name: "invalid CIDR in a pool",
			edit: replace("198.51.100.128/26", "198.51.100.0/33"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.0/33": invalid CIDR`},
		},
		{
			name: "CIDR with host bits",
			edit: replace("198.51.100.128/26", "198.51.100.130/26"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.130/26": invalid CIDR: host bits set, did you mean 198.51.100.128/26`},
		},
		{
			name: "range start after end",
			edit: replace("198.51.100.128/26", "198.51.100.20-198.51.100.10"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.20-198.51.100.10": range start 198.51.100.20 is after its end 198.51.100.10`},
		},
		{
			name: "range mixing families",
			edit: replace("198.51.100.128/26", "198.51.100.10-2001:db8::10"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.10-2001:db8::10": range mixes IPv4 and IPv6`},
		},
		{
			name: "bad IP in a range",
			edit: replace("198.51.100.128/26", "198.51.100.300-198.51.100.310"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.300-198.51.100.310": invalid range start: invalid IP address`},
		},
		{
			name: "overlapping pools",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: b\n      addresses: [198.51.100.190-198.51.100.200]\n"),
			want: []string{`spec.servicePools[1].addresses[0]: Invalid value: "198.51.100.190-198.51.100.200": overlaps spec.servicePools[0].addresses[0]`},
		},
		{
			name: "duplicate pool names",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: a\n      addresses: [198.51.100.210/32]\n"),
			want: []string{`spec.servicePools[1].name: Duplicate value: "a (also spec.servicePools[0].name)"`},
		},
		{
			name: "VIP used by API and ingress",
			edit: replace("vips: [198.51.100.6]", "vips: [198.51.100.5]"),
			want: []string{`spec.ingress[0].vips[0]: Duplicate value: "198.51.100.5 (also spec.api.vips[0])"`},
		},
		{
			name: "VIP inside a pool",
			edit: replace("vips: [198.51.100.6]", "vips: [198.51.100.130]"),
			want: []string{`spec.ingress[0].vips[0]: Invalid value: "198.51.100.130": inside service pool spec.servicePools[0].addresses[0]`},
		},
		{
			name: "VIP outside every machine network",
			edit: replace("vips: [198.51.100.5]", "vips: [203.0.113.5]"),
			want: []string{`spec.api.vips[0]: Invalid value: "203.0.113.5": outside every machine network (198.51.100.0/24, 2001:db8::/64)`},
		},
		{
			name: "two VIPs of one family",
			edit: replace("vips: [198.51.100.5]", "vips: [198.51.100.5, 198.51.100.9]"),
			want: []string{`spec.api.vips[1]: Invalid value: "198.51.100.9": a second IPv4 VIP; spec.api.vips[0] already has one (one VIP per family)`},
		},
		{
			name: "a configured port on one of vipctl's own node ports",
			edit: func(s string) string {
				return strings.NewReplacer("    vips: [198.51.100.5]\n", "    vips: [198.51.100.5]\n    healthPort: 9449\n    loadBalancerPort: 9447\n",
					"      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 9448\n").Replace(s)
			},
			want: []string{
				`spec.api.loadBalancerPort: Invalid value: 9447: vipctl's sidecar serves its health probes on 127.0.0.1 on 9447 on every node`,
				`spec.api.healthPort: Invalid value: 9449: vipctl's sidecar serves /metrics to the cluster's Prometheus on 9449 on every node (spec.monitoring.port moves it)`,
				`spec.ingress[0].healthPort: Invalid value: 9448: haproxy serves its stats page on 127.0.0.1 on 9448 on control-plane nodes`,
			},
		},
		{
			name: "monitoring.port moves the metrics port: 9449 is free then, the API port is not",
			edit: func(s string) string {
				return strings.Replace(s, "    vips: [198.51.100.5]\n", "    vips: [198.51.100.5]\n    healthPort: 9449\n", 1) + "  monitoring:\n    port: 6443\n"
			},
			want: []string{`spec.monitoring.port: Invalid value: 6443: spec.api.port is 6443 too; the sidecar serves /metrics on every address of every node`},
		},
		{
			name: "monitoring.port on an ingress health port",
			edit: func(s string) string {
				return strings.Replace(s, "      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 9500\n", 1) + "  monitoring:\n    port: 9500\n"
			},
			want: []string{`spec.monitoring.port: Invalid value: 9500: spec.ingress[0].healthPort is 9500 too; the sidecar serves /metrics on every address of every node`},
		},
		{
			name: "monitoring.port on haproxy's stats port",
			edit: func(s string) string { return s + "  monitoring:\n    port: 9448\n" },
			want: []string{`spec.monitoring.port: Invalid value: 9448: haproxy serves its stats page on 127.0.0.1 on 9448 on control-plane nodes`},
		},
		{
			name: "monitoring.port out of range",
			edit: func(s string) string { return s + "  monitoring:\n    port: 70000\n" },
			want: []string{`spec.monitoring.port: Invalid value: 70000: must be between 1 and 65535`},
		},
		{
			name: "monitoring: an unknown stack, a bad ServiceAccount and label",
			edit: func(s string) string {
				return s + "  monitoring:\n    stack: victoria\n    prometheus: {namespace: Mon, name: \"\"}\n    labels: {\"bad key!\": x}\n"
			},
			want: []string{
				`spec.monitoring.stack: Unsupported value: "victoria": supported values: "openshift", "prometheus-operator", "none"`,
				`spec.monitoring.prometheus.namespace: Invalid value: "Mon": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
				`spec.monitoring.prometheus.name: Required value`,
				`spec.monitoring.labels[bad key!]: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			},
		},
		{
			name: "pool outside machine networks",
			edit: replace("198.51.100.128/26", "203.0.113.0/26"),
			want: []string{`spec.servicePools[0].addresses[0]: Invalid value: "203.0.113.0/26": not inside one machine network (198.51.100.0/24, 2001:db8::/64): keepalived announces pool addresses on the node's own L2 segment`},
		},
		{
			name: "VRID override out of range and duplicated",
			edit: withVRRP("    virtualRouterIDs: {api: 300, ingress: 7, pool/a/0: 7}\n"),
			want: []string{
				`spec.vrrp.virtualRouterIDs[api]: Invalid value: 300: must be between 1 and 255`,
				`spec.vrrp.virtualRouterIDs[pool/a/0]: Duplicate value: "7 (also spec.vrrp.virtualRouterIDs[ingress])"`,
			},
		},
		{
			name: "VRID override for an unknown instance",
			edit: withVRRP("    virtualRouterIDs: {pool/zz/0: 9}\n"),
			want: []string{`spec.vrrp.virtualRouterIDs[pool/zz/0]: Invalid value: "pool/zz/0": no such VRRP instance; known: api, ingress, pool/a/0, pool/a/1`},
		},
		{
			name: "avoided ID also pinned",
			edit: withVRRP("    virtualRouterIDs: {api: 9}\n    avoidVirtualRouterIDs: [9, 0]\n"),
			want: []string{
				`spec.vrrp.avoidVirtualRouterIDs[0]: Invalid value: 9: also pinned by spec.vrrp.virtualRouterIDs[api]`,
				`spec.vrrp.avoidVirtualRouterIDs[1]: Invalid value: 0: must be between 1 and 255`,
			},
		},
		{
			name: "fractional advert with VRRPv2",
			edit: withVRRP("    advertInterval: 500ms\n"),
			want: []string{`spec.vrrp.advertInterval: Invalid value: "500ms": VRRPv2 needs whole seconds from 1s to 255s; use version 3 for sub-second adverts`},
		},
		{
			name: "advert too long for VRRPv3",
			edit: withVRRP("    version: 3\n    advertInterval: 41s\n"),
			want: []string{`spec.vrrp.advertInterval: Invalid value: "41s": VRRPv3 needs 10ms to 40.95s in steps of 10ms`},
		},
		{
			name: "advert too short for VRRPv3",
			edit: withVRRP("    version: 3\n    advertInterval: 5ms\n"),
			want: []string{`spec.vrrp.advertInterval: Invalid value: "5ms": VRRPv3 needs 10ms to 40.95s in steps of 10ms`},
		},
		{
			name: "fast profile with VRRPv2",
			edit: withVRRP("    profile: fast\n    version: 2\n"),
			want: []string{
				`spec.vrrp.version: Invalid value: 2: the fast profile needs VRRPv3 (VRRPv2 cannot advertise more often than once a second)`,
				`spec.vrrp.advertInterval: Invalid value: "100ms": VRRPv2 needs whole seconds from 1s to 255s; use version 3 for sub-second adverts`,
			},
		},
		{
			name: "unknown mode",
			edit: withVRRP("    mode: broadcast\n"),
			want: []string{`spec.vrrp.mode: Unsupported value: "broadcast": supported values: "unicast", "multicast"`},
		},
		{
			name: "unknown announce",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n      announce: frr\n"),
			want: []string{`spec.servicePools[0].announce: Unsupported value: "frr": supported values: "keepalived", "sidecar"`},
		},
		{
			name: "names that would inject into configs",
			edit: func(s string) string {
				s = strings.Replace(s, "name: ostest", `name: "ostest\"; rm -rf /"`, 1)
				return strings.Replace(s, "- name: a\n", "- name: \"a}\\nvrrp_script x {\"\n", 1)
			},
			want: []string{
				`metadata.name: Invalid value: "ostest\"; rm -rf /": a lowercase RFC 1123 label`,
				`spec.servicePools[0].name: Invalid value: "a}\nvrrp_script x {": a lowercase RFC 1123 label`,
			},
		},
		{
			name: "interface name that would inject",
			edit: withVRRP("    interface: \"br-ex\\n}\"\n"),
			want: []string{`spec.vrrp.interface: Invalid value: "br-ex\n}": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`},
		},
		{
			name: "image reference with a space",
			edit: replace("  servicePools:", "  images:\n    vipctl: \"quay.io/x/y:1 --privileged\"\n  servicePools:"),
			want: []string{`spec.images.vipctl: Invalid value: "quay.io/x/y:1 --privileged": not a container image reference (registry/name:tag or @sha256:digest)`},
		},
		{
			name: "shard without a domain",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n    - name: internal\n      vips: [198.51.100.7]\n"),
			want: []string{`spec.ingress[1].domain: Required value: the domain this IngressController serves (only "default" has one by default)`},
		},
		{
			name: "bad router selector",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      routerSelector: {\"bad key!\": x}\n"),
			want: []string{`spec.ingress[0].routerSelector[bad key!]: Invalid value: "bad key!": name part must consist of alphanumeric characters`},
		},
		{
			name: "bad node selector of an IngressController",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      nodeSelector: {node-role.kubernetes.io/infra: \"not a value!\"}\n"),
			want: []string{`spec.ingress[0].nodeSelector[node-role.kubernetes.io/infra]: Invalid value: "not a value!": a valid label must be an empty string or consist of alphanumeric characters`},
		},
		{
			name: "several errors at once",
			edit: func(s string) string {
				return strings.NewReplacer("198.51.100.128/26", "nope", "vips: [198.51.100.5]", "vips: [198.51.100.500]").Replace(s)
			},
			want: []string{
				`spec.api.vips[0]: Invalid value: "198.51.100.500": invalid IP address`,
				`spec.servicePools[0].addresses[0]: Invalid value: "nope": must be a CIDR (198.51.100.128/26) or a range (198.51.100.200-198.51.100.210)`,
			},
		},
		{
			name: "OpenShift release out of support",
			edit: replace("  servicePools:", "  openshiftRelease: \"4.12\"\n  servicePools:"),
			want: []string{`spec.openshiftRelease: Invalid value: "4.12": OpenShift 4.12 is not supported; supported: 4.14, 4.15, 4.16, 4.17, 4.18, 4.19, 4.20, 4.21, 4.22`},
		},
		{
			name: "OpenShift release not known yet",
			edit: replace("  servicePools:", "  openshiftRelease: \"4.23\"\n  servicePools:"),
			want: []string{`spec.openshiftRelease: Invalid value: "4.23": OpenShift 4.23 is newer than this vipctl knows: target 4.22, the newest it supports, whose MachineConfigs later releases accept too`},
		},
		{
			name: "OpenShift release with a patch level",
			edit: replace("  servicePools:", "  openshiftRelease: \"4.16.3\"\n  servicePools:"),
			want: []string{`spec.openshiftRelease: Invalid value: "4.16.3": want major.minor without a patch level, such as 4.14`},
		},
		{
			// Unquoted, as written: 4.2 is not 4.20 (TestReleaseAsWritten).
			name: "OpenShift release unquoted",
			edit: replace("  servicePools:", "  openshiftRelease: 4.2\n  servicePools:"),
			want: []string{`spec.openshiftRelease: Invalid value: "4.2": OpenShift 4.2 is not supported; supported: 4.14, 4.15, 4.16, 4.17, 4.18, 4.19, 4.20, 4.21, 4.22`},
		},
		{
			name: "a second YAML document is refused, not ignored",
			edit: func(s string) string { return s + "---\n" + s },
			want: []string{`line 16: a second YAML document; the file must hold exactly one ClusterVIPs`},
		},
		{
			name: "explicit instances 0 is not the default",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n      instances: 0\n      maxHolders: 0\n"),
			want: []string{
				`spec.servicePools[0].instances: Invalid value: 0: must be between 1 and 16; leave it out for the default 2`,
				`spec.servicePools[0].maxHolders: Invalid value: 0: must be at least 2; leave it out for the default 8`,
			},
		},
		{
			name: "VIP on a machine network's network and broadcast address",
			edit: func(s string) string {
				return strings.NewReplacer("vips: [198.51.100.5]", "vips: [198.51.100.0, \"2001:db8::\"]", "vips: [198.51.100.6]", "vips: [198.51.100.255]").Replace(s)
			},
			want: []string{
				`spec.api.vips[0]: Invalid value: "198.51.100.0": is the network address of machine network 198.51.100.0/24`,
				`spec.api.vips[1]: Invalid value: "2001:db8::": is the network address of machine network 2001:db8::/64`,
				`spec.ingress[0].vips[0]: Invalid value: "198.51.100.255": is the broadcast address of machine network 198.51.100.0/24`,
			},
		},
		{
			name: "negative maxPerNamespace",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n      maxPerNamespace: -1\n"),
			want: []string{`spec.servicePools[0].maxPerNamespace: Invalid value: -1: must be 0 (no cap) or more`},
		},
		{
			name: "a last range that the anchors would use up",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26, 198.51.100.200-198.51.100.201]\n"),
			want: []string{`spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.200-198.51.100.201": too small: its last 2 address(es) anchor the pool's VRRP instances (one each) and at least one must be left for Services`},
		},
	}
	runParseErrors(t, base, cases)
}

// parseErrorCase edits a valid document and lists messages (path
// included) the error must contain; with exact, the whole list of
// errors, each in full, in order.
type parseErrorCase struct {
	name  string
	edit  func(string) string
	want  []string
	exact bool
}

func runParseErrors(t *testing.T, doc string, cases []parseErrorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.edit(doc)))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.exact {
				if got := errorLines(err); !slices.Equal(got, tc.want) {
					t.Errorf("errors\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
				}
				return
			}
			got := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("error does not contain\n  %s\ngot\n  %s", w, got)
				}
			}
		})
	}
}

// TestValidateNodes: with the node list known (render --nodes), a VIP that
// is a node's own address or a pool containing one is refused with its
// field path; a Service given it would take that node's traffic.
func TestValidateNodes(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(strings.Replace(base, "[198.51.100.128/26]", "[198.51.100.128/26, 198.51.100.192/26]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []NodeAddresses{
		{Name: "master-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.5")}},
		{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.130"), netip.MustParseAddr("2001:db8::130")}},
		{Name: "worker-1", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.20")}},
	}
	want := []string{
		`spec.api.vips[0]: Invalid value: "198.51.100.5": is the address of node master-0`,
		`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.128/26": contains 198.51.100.130, the address of node worker-0, which must never be handed out`,
		`spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.192/26": contains 198.51.100.255, the broadcast address of machine network 198.51.100.0/24, which must never be handed out`,
	}
	got := ValidateNodes(c, nodes)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("error %d:\n  got  %s\n  want %s", i, got[i], want[i])
		}
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("test edit does not apply: " + old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func withVRRP(body string) func(string) string {
	return func(s string) string { return s + "  vrrp:\n" + body }
}

func TestAddressRange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in          string
		first, last string
		size        string
	}{
		{"198.51.100.128/26", "198.51.100.128", "198.51.100.191", "64"},
		{"198.51.100.7/32", "198.51.100.7", "198.51.100.7", "1"},
		{"198.51.100.200-198.51.100.210", "198.51.100.200", "198.51.100.210", "11"},
		{"2001:db8::1:0/112", "2001:db8::1:0", "2001:db8::1:ffff", "65536"},
		{"2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "79228162514264337593543950336"},
	}
	for _, tc := range cases {
		r, err := ParseAddressRange(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if r.First.String() != tc.first || r.Last.String() != tc.last || r.Size().String() != tc.size {
			t.Errorf("%s = %s size %s, want %s-%s size %s", tc.in, r, r.Size(), tc.first, tc.last, tc.size)
		}
	}
	a, _ := ParseAddressRange("198.51.100.0/25")
	b, _ := ParseAddressRange("198.51.100.127-198.51.100.130")
	c, _ := ParseAddressRange("198.51.100.128/25")
	if !a.Overlaps(b) || !b.Overlaps(c) || a.Overlaps(c) {
		t.Errorf("overlap: a~b %v b~c %v a~c %v", a.Overlaps(b), b.Overlaps(c), a.Overlaps(c))
	}
}

// TestAnchors: each instance's anchor is one of the last addresses of the
// pool's last range of its family, distinct, and none is left to Services.
func TestAnchors(t *testing.T) {
	p := ServicePool{Instances: 3, Addresses: []string{"198.51.100.128/26", "2001:db8::100-2001:db8::1ff", "198.51.100.200-198.51.100.210"}}
	if got := fmt.Sprint(p.Anchors(true)); got != "[198.51.100.210 198.51.100.209 198.51.100.208]" {
		t.Errorf("IPv4 anchors %s", got)
	}
	if got := fmt.Sprint(p.Anchors(false)); got != "[2001:db8::1ff 2001:db8::1fe 2001:db8::1fd]" {
		t.Errorf("IPv6 anchors %s", got)
	}
	if !p.IsAnchor(netip.MustParseAddr("198.51.100.209")) || p.IsAnchor(netip.MustParseAddr("198.51.100.191")) {
		t.Errorf("IsAnchor wrong")
	}
	if got := (&ServicePool{Instances: 2, Addresses: []string{"198.51.100.128/26"}}).Anchors(false); got != nil {
		t.Errorf("IPv6 anchors of an IPv4 pool: %v", got)
	}
}

// TestReleaseAsWritten: YAML reads an unquoted `openshiftRelease: 4.20` as
// the number 4.2. The release is taken as written, in every form the
// field can be written in, and an error later in the file still names its
// own line.
func TestReleaseAsWritten(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ line, want string }{
		"plain 4.20":  {"  openshiftRelease: 4.20\n", "4.20"},
		"plain 4.19":  {"  openshiftRelease: 4.19\n", "4.19"},
		"comment":     {"  openshiftRelease: 4.20   # the oldest cluster\n", "4.20"},
		"quoted":      {"  openshiftRelease: \"4.20\"\n", "4.20"},
		"single":      {"  openshiftRelease: '4.20'\n", "4.20"},
		"after UTF-8": {"  # réseau\n  openshiftRelease: 4.20\n", "4.20"},
		"int":         {"  openshiftRelease: 4\n", ""},
	} {
		c, err := Parse([]byte(strings.Replace(base, "  servicePools:", tc.line+"  servicePools:", 1)))
		if tc.want == "" {
			if want := `spec.openshiftRelease: Invalid value: "4": not an OpenShift release: want major.minor, such as 4.14`; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %s", name, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Spec.OpenShiftRelease != tc.want {
			t.Errorf("%s: openshiftRelease %q, want %q", name, c.Spec.OpenShiftRelease, tc.want)
		}
	}
	// A flow mapping, with two-byte characters before the value on its
	// line: the parser counts columns in characters.
	doc := "apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\nmetadata: {name: ostest}\nspec: {vrrp: {interface: \"é\"}, openshiftRelease: 4.20}\n"
	c, err := Decode([]byte(doc))
	if err != nil || c.Spec.OpenShiftRelease != "4.20" {
		t.Errorf("flow mapping: %v %+v", err, c)
	}
	// The release goes on line 13, where base's servicePools was, the
	// duplicate on 14.
	_, err = Parse([]byte(strings.Replace(base, "  servicePools:", "  openshiftRelease: 4.20\n  baseDomain: again.test\n  servicePools:", 1)))
	if err == nil || !strings.Contains(err.Error(), `line 14: key "baseDomain" already set in map`) {
		t.Errorf("a duplicate key after it: %v", err)
	}
}
