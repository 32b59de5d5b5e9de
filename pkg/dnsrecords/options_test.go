package dnsrecords

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestCheckOptionsValidate: dns check's flags are refused as flag errors,
// every one at once, before a query goes out: a port 0 or a negative
// timeout used to be reported as a server that does not answer.
func TestCheckOptionsValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		o    CheckOptions
		want string
	}{
		{"an address", CheckOptions{Server: "198.51.100.53", Timeout: time.Second}, ""},
		{"an address and port", CheckOptions{Server: "[2001:db8::53]:5353", Timeout: time.Second}, ""},
		{"a local resolver", CheckOptions{Server: "127.0.0.53", Timeout: time.Second}, ""},
		{"resolv.conf", CheckOptions{Timeout: DefaultTimeout}, ""},
		{"port 0", CheckOptions{Server: "198.51.100.53:0", Timeout: time.Second},
			`--server "198.51.100.53:0": port 0: no DNS server listens there (leave the port out for 53)`},
		{"IPv6 port 0", CheckOptions{Server: "[2001:db8::53]:0", Timeout: time.Second},
			`--server "[2001:db8::53]:0": port 0: no DNS server listens there (leave the port out for 53)`},
		{"a port past 65535", CheckOptions{Server: "198.51.100.53:65536", Timeout: time.Second},
			`--server "198.51.100.53:65536": not an IP address, or an address and port (198.51.100.53, [2001:db8::53]:5353)`},
		{"a host name", CheckOptions{Server: "ns1.example.test:53", Timeout: time.Second},
			`--server "ns1.example.test:53": not an IP address, or an address and port (198.51.100.53, [2001:db8::53]:5353)`},
		{"a bracket missing", CheckOptions{Server: "2001:db8::53]:53", Timeout: time.Second},
			`--server "2001:db8::53]:53": not an IP address, or an address and port (198.51.100.53, [2001:db8::53]:5353)`},
		{"unspecified", CheckOptions{Server: "0.0.0.0", Timeout: time.Second},
			`--server "0.0.0.0": 0.0.0.0 names no server: give the DNS server's own address`},
		{"multicast", CheckOptions{Server: "[ff02::fb]:5353", Timeout: time.Second},
			`--server "[ff02::fb]:5353": ff02::fb names no server: give the DNS server's own address`},
		{"a zone", CheckOptions{Server: "fe80::53%eth0", Timeout: time.Second},
			`--server "fe80::53%eth0": an address with a zone: give the DNS server's address without %eth0`},
		{"a negative timeout", CheckOptions{Server: "198.51.100.53", Timeout: -time.Second},
			"--timeout -1s: must be positive: how long each query waits for its answer (default 2s)"},
		{"no timeout", CheckOptions{Server: "198.51.100.53"},
			"--timeout 0s: must be positive: how long each query waits for its answer (default 2s)"},
		{"both at once", CheckOptions{Server: "198.51.100.53:0", Timeout: -time.Second},
			"--server \"198.51.100.53:0\": port 0: no DNS server listens there (leave the port out for 53)\n--timeout -1s: must be positive: how long each query waits for its answer (default 2s)"},
	}
	for _, tc := range cases {
		if got := fixture.ErrText(tc.o.Validate()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
	// Check refuses them the same, before any query: no config is needed.
	if _, err := Check(t.Context(), fixture.Example(t, "compact-ipv4.yaml"), CheckOptions{Server: "198.51.100.53:0", Timeout: time.Second}); err == nil || err.Error() != `--server "198.51.100.53:0": port 0: no DNS server listens there (leave the port out for 53)` {
		t.Errorf("Check: %v", err)
	}
}
