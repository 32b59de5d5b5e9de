package v1alpha1

import (
	"strings"
	"testing"
)

// TestRangePrefixes: a range splits into the fewest CIDRs that hold it
// exactly, a CIDR into itself.
func TestRangePrefixes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"198.51.100.128/26":             "198.51.100.128/26",
		"198.51.100.200-198.51.100.210": "198.51.100.200/29 198.51.100.208/31 198.51.100.210/32",
		"198.51.100.7-198.51.100.7":     "198.51.100.7/32",
		"0.0.0.0-255.255.255.255":       "0.0.0.0/0",
		"2001:db8::1-2001:db8::4":       "2001:db8::1/128 2001:db8::2/127 2001:db8::4/128",
	} {
		r, err := ParseAddressRange(in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range r.Prefixes() {
			got = append(got, p.String())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: Prefixes = %v, want %s", in, got, want)
		}
	}
}
