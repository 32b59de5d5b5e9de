package frr

import (
	"strings"
	"testing"
)

// TestHasClient reads `show zebra client summary` as FRR 8.4.4 prints
// it: bgpd is a client once its line is there, whatever else is.
func TestHasClient(t *testing.T) {
	const summary = `Name      Connect Time    Last Read  Last Write      IPv4 Routes           IPv6 Routes
------------------------------------------------------------------------------------------
bgp           00:00:01     00:00:01    00:00:01          0/0                   0/0         
vnc           00:00:01     00:00:01    00:00:01          0/0                   0/0         
Routes column shows (added+updated)/deleted
`
	if !hasClient(summary, "bgp") {
		t.Error("bgp not found among the clients")
	}
	if hasClient(summary, "bfd") || hasClient(strings.SplitN(summary, "bgp", 2)[0], "bgp") {
		t.Error("a client found that the summary does not list")
	}
}
