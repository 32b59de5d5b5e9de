package v1alpha1

import (
	"errors"
	"strings"
	"testing"
)

// errorLines is every line of a Parse error: each field error of a
// ValidationError, or the one message of any other error.
func errorLines(err error) []string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		out := make([]string, len(ve.Errors))
		for i, e := range ve.Errors {
			out[i] = e.Error()
		}
		return out
	}
	return []string{err.Error()}
}

// TestDecodeAcceptsWhatKubernetesDoes: input that is valid where the
// same thing is written for Kubernetes is not refused (issue 47, class 9).
func TestDecodeAcceptsWhatKubernetesDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(string) string
	}{
		{"a trailing --- with nothing after it", func(s string) string { return s + "---\n" }},
		{"a trailing --- with a comment after it", func(s string) string { return s + "---\n# the end\n" }},
		{"a trailing --- and the end marker", func(s string) string { return s + "---\n...\n" }},
		{"a leading --- and an empty document before the one", func(s string) string { return "---\n# nothing here\n---\n" + s }},
		{"a ServiceAccount name with dots", func(s string) string {
			return s + "  monitoring:\n    prometheus: {namespace: openshift-monitoring, name: prometheus.k8s}\n"
		}},
		{"a ServiceAccount name of 253 characters", func(s string) string {
			return s + "  monitoring:\n    prometheus: {namespace: monitoring, name: " + strings.Repeat("a.", 126) + "b}\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.edit(base)))
			if err != nil {
				t.Fatal(err)
			}
			if c.Metadata.Name != "ostest" || len(c.Spec.ServicePools) != 1 {
				t.Errorf("decoded %+v", c)
			}
		})
	}
}

// TestDecodeMessages: a value of the wrong kind is named in YAML's words
// (a string, a number, a mapping, a list), at its full path with every
// list index, all of them at once; nothing YAML can write is called JSON
// (issue 47, class 10).
func TestDecodeMessages(t *testing.T) {
	t.Parallel()
	runParseErrors(t, bgpBase, exact([]parseErrorCase{
		{
			name: "a quoted boolean in the first peer, an ASN as a string in the third",
			edit: func(s string) string {
				s = strings.Replace(s, "bfd: true", `bfd: "yes"`, 1)
				return strings.Replace(s, "address: \"2001:db8::1\"\n        asn: 64512", "address: \"2001:db8::1\"\n        asn: \"64512\"", 1)
			},
			want: []string{
				`spec.bgp.peers[0].bfd: Invalid value: "yes": must be true or false, not a string`,
				`spec.bgp.peers[2].asn: Invalid value: "64512": must be a whole number, not a string`,
			},
		},
		{
			name: "a number where a string goes, in a list and a mapping",
			edit: func(s string) string {
				s = strings.Replace(s, "addresses: [198.51.100.128/26]", "addresses: [198.51.100.128/26, 7]", 1)
				return strings.Replace(s, "rack: r1", "rack: 1", 1)
			},
			want: []string{
				`spec.servicePools[0].addresses[1]: Invalid value: 7: must be a string, not a number (quote it)`,
				`spec.bgp.peers[0].nodeSelector[rack]: Invalid value: 1: must be a string, not a number (quote it)`,
			},
		},
		{
			name: "a list where a string goes, a mapping where a list goes",
			edit: func(s string) string {
				s = strings.Replace(s, "baseDomain: example.test", "baseDomain: [example.test]", 1)
				return strings.Replace(s, `communities: ["64512:100", no-export]`, `communities: {a: b}`, 1)
			},
			want: []string{
				`spec.baseDomain: Invalid value: must be a string, not a list`,
				`spec.bgp.communities: Invalid value: must be a list, not a mapping`,
			},
		},
		{
			name: "numbers that are not whole or do not fit",
			edit: func(s string) string {
				s = strings.Replace(s, "asn: 64513", "asn: 4294967296", 1)
				return strings.Replace(s, "    vips: [198.51.100.5]\n", "    vips: [198.51.100.5]\n    port: 1.5\n    healthPort: -3000000000\n", 1)
			},
			want: []string{
				`spec.api.port: Invalid value: 1.5: must be a whole number`,
				`spec.api.healthPort: Invalid value: -3000000000: must be a whole number from -2147483648 to 2147483647`,
				`spec.bgp.asn: Invalid value: 4294967296: must be a whole number from 0 to 4294967295`,
			},
		},
		{
			name: "a whole section of the wrong kind",
			edit: replace("  bgp:\n    asn: 64513\n", "  vrrp: [unicast]\n  bgp:\n    asn: 64513\n"),
			want: []string{`spec.vrrp: Invalid value: must be a mapping, not a list`},
		},
		{
			name: "an annotation that is no string",
			edit: replace("  name: ostest\n", "  name: ostest\n  annotations: {owner: true}\n"),
			want: []string{`metadata.annotations[owner]: Invalid value: true: must be a string, not a boolean (quote it)`},
		},
		{
			name: "a file that is a list",
			edit: func(string) string { return "- apiVersion: vipctl.io/v1alpha1\n" },
			want: []string{`(file): Invalid value: must be a mapping (apiVersion, kind, metadata, spec), not a list`},
		},
		{
			name: "NaN and infinity, which JSON has no word for",
			edit: func(s string) string {
				s = strings.Replace(s, "asn: 64513", "asn: .nan", 1)
				return strings.Replace(s, "holdTime: 30s", "holdTime: -.Inf", 1)
			},
			want: []string{
				`spec.bgp.asn: Invalid value: ".nan": line 20: not a finite number; no field takes NaN or infinity`,
				`spec.bgp.peers[1].holdTime: Invalid value: "-.Inf": line 29: not a finite number; no field takes NaN or infinity`,
			},
		},
		{
			name: "a list as a mapping key",
			edit: replace("    asn: 64513\n", "    asn: 64513\n    ? [a, b]\n    : c\n"),
			want: []string{`spec.bgp: Invalid value: line 21: a mapping key must be a plain string, not a list`},
		},
		{
			name: "a second document after an empty one is still a second document",
			edit: func(s string) string { return s + "---\n---\n" + s },
			want: []string{`line 33: a second YAML document; the file must hold exactly one ClusterVIPs`},
		},
	}))
}

// exact marks every case to want its whole list of errors.
func exact(cases []parseErrorCase) []parseErrorCase {
	for i := range cases {
		cases[i].exact = true
	}
	return cases
}

// TestGoTypesOut: should the strict decoder's own words ever reach the
// user, they name the field path and no Go type.
func TestGoTypesOut(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"cannot unmarshal string into Go struct field BGPPeer.spec.bgp.peers.bfd of type bool": "cannot unmarshal string into field spec.bgp.peers.bfd",
		"cannot unmarshal array into Go value of type v1alpha1.ClusterVIPs":                    "cannot unmarshal array into a ClusterVIPs",
	} {
		if got := goTypesOut(in); got != want {
			t.Errorf("goTypesOut(%q) = %q, want %q", in, got, want)
		}
	}
}
