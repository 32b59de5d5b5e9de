package preflight

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestOptionsValidate: preflight's flags are refused before a packet is
// sent: a zero wait would report every address as free.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"the defaults", Options{Interface: "br-ex", Timeout: DefaultTimeout}, ""},
		{"the interface left to the config", Options{Timeout: time.Second}, ""},
		{"a zero --timeout", Options{Interface: "br-ex"}, "--timeout 0s: must be positive: how long answers are awaited after the last request (default " + DefaultTimeout.String() + ")"},
		{"a negative --timeout", Options{Interface: "br-ex", Timeout: -time.Second}, "--timeout -1s: must be positive: how long answers are awaited after the last request (default " + DefaultTimeout.String() + ")"},
		{"an interface that is none", Options{Interface: "br ex", Timeout: time.Second}, `--interface "br ex": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`},
		{"both", Options{Interface: "a/b", Timeout: -1},
			"--interface \"a/b\": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -\n--timeout -1ns: must be positive: how long answers are awaited after the last request (default " + DefaultTimeout.String() + ")"},
	}
	for _, tc := range cases {
		if got := fixture.ErrText(tc.o.Validate()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
