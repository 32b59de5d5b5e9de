package v1alpha1

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseStoredUnknownFields: a stored copy with fields a newer vipctl
// wrote decodes, its known fields intact, and the unknown ones come back
// by their full paths (list indexes included), sorted; Parse, for what a
// person writes, refuses the same copy naming the same paths.
func TestParseStoredUnknownFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(string) string
		want UnknownFields
	}{
		{"none", func(s string) string { return s }, nil},
		{"a scalar in a pool", func(s string) string {
			return strings.Replace(s, "      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n      futureKnob: 3\n", 1)
		}, UnknownFields{"spec.servicePools[0].futureKnob"}},
		{"a mapping under spec, named once", func(s string) string {
			return s + "  futureSection:\n    enabled: true\n    items: [a, b]\n"
		}, UnknownFields{"spec.futureSection"}},
		{"in an IngressController, in metadata and at the top, sorted", func(s string) string {
			s = strings.Replace(s, "      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      zLater: x\n", 1)
			s = strings.Replace(s, "  name: ostest\n", "  name: ostest\n  generation: 2\n", 1)
			return s + "status:\n  holders: 3\n"
		}, UnknownFields{"metadata.generation", "spec.ingress[0].zLater", "status"}},
		{"in the second pool", func(s string) string {
			return s + "    - name: b\n      addresses: [198.51.100.192/26]\n      mode: vrrp\n      weight: 1\n"
		}, UnknownFields{"spec.servicePools[1].weight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := []byte(tc.edit(base))
			c, unknown, err := ParseStored(data)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(unknown, tc.want) {
				t.Errorf("unknown fields %q, want %q", unknown, tc.want)
			}
			// Defaults applied and known fields kept, as Parse does.
			if c.Metadata.Name != "ostest" || c.Spec.ServicePools[0].Addresses[0] != "198.51.100.128/26" || c.Spec.ServicePools[0].Instances != DefaultPoolInstances {
				t.Errorf("decoded %+v", c.Spec.ServicePools[0])
			}
			_, err = Parse(data)
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Parse: %v", err)
				}
				return
			}
			var want []string
			for _, path := range tc.want {
				want = append(want, path+": Invalid value: unknown field")
			}
			if got := errorLines(err); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
				t.Errorf("Parse errors %q, want %q", got, want)
			}
		})
	}
}

// TestParseStoredStillRefuses: tolerance covers fields this release does
// not know and nothing else: a known field of the wrong kind, a duplicate,
// a value validation refuses, a second document are errors with their
// paths, also beside an unknown field, and nothing is returned.
func TestParseStoredStillRefuses(t *testing.T) {
	t.Parallel()
	withUnknown := func(s string) string { return s + "  futureSection: {}\n" }
	for _, tc := range []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"a known field of the wrong kind", func(s string) string {
			return withUnknown(strings.Replace(s, "addresses: [198.51.100.128/26]", "addresses: 198.51.100.128/26", 1))
		}, []string{`spec.servicePools[0].addresses: Invalid value: "198.51.100.128/26": must be a list, not a string`}},
		{"a number where a string goes", func(s string) string {
			return withUnknown(strings.Replace(s, "name: a\n", "name: 7\n", 1))
		}, []string{`spec.servicePools[0].name: Invalid value: 7: must be a string, not a number (quote it)`}},
		{"a duplicate field", func(s string) string {
			return withUnknown(strings.Replace(s, "  baseDomain: example.test\n", "  baseDomain: example.test\n  baseDomain: example.org\n", 1))
		}, []string{"not valid YAML: yaml: unmarshal errors:\n  line 7: key \"baseDomain\" already set in map"}},
		{"a value validation refuses", func(s string) string {
			return withUnknown(strings.Replace(s, "198.51.100.128/26", "198.51.100.128/33", 1))
		}, []string{`spec.servicePools[0].addresses[0]: Invalid value: "198.51.100.128/33": invalid CIDR`}},
		{"another apiVersion", func(s string) string {
			return withUnknown(strings.Replace(s, "vipctl.io/v1alpha1", "vipctl.io/v1alpha2", 1))
		}, []string{`apiVersion: Unsupported value: "vipctl.io/v1alpha2": supported values: "vipctl.io/v1alpha1"`}},
		{"a second document", func(s string) string { return withUnknown(s) + "---\n" + base },
			[]string{"line 17: a second YAML document; the file must hold exactly one ClusterVIPs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, unknown, err := ParseStored([]byte(tc.edit(base)))
			if err == nil {
				t.Fatalf("no error; unknown fields %q", unknown)
			}
			if c != nil || unknown != nil {
				t.Errorf("returned %v and %q beside the error", c, unknown)
			}
			if got := errorLines(err); !slices.Equal(got, tc.want) {
				t.Errorf("errors\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestLoadStored: the file's errors name it; its unknown fields come back.
func TestLoadStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "cluster.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(base+"  futureSection: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(base, "name: a\n", "name: 7\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, unknown, err := LoadStored(good); err != nil || !slices.Equal(unknown, UnknownFields{"spec.futureSection"}) {
		t.Errorf("LoadStored(good) = %q, %v", unknown, err)
	}
	if got, want := UnknownFields([]string{"spec.futureSection"}).String(), "fields this vipctl does not know (written by a newer one), ignored: spec.futureSection"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	_, _, err := LoadStored(bad)
	if want := bad + ": 1 invalid field(s):\n  spec.servicePools[0].name: Invalid value: 7: must be a string, not a number (quote it)"; err == nil || err.Error() != want {
		t.Errorf("LoadStored(bad) = %v, want %s", err, want)
	}
}
