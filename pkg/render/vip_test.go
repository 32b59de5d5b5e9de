package render

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestEveryVIPMarkedNotTheNodes: in every example's keepalived.conf on
// every node, each address keepalived puts on the interface (VIPs,
// anchors, Service addresses held with an instance) carries what
// OpenShift's keepalived gives its VIPs and OVN-Kubernetes reads as "not
// the node's address" (VIPLabel): IPv4 ones the label, IPv6 ones a /128
// with no preferred_lft, which keepalived then adds deprecated (and no
// label, which keepalived refuses for IPv6), on the VRRP interface or, for
// VIPs of their own interface, on that one.
func TestEveryVIPMarkedNotTheNodes(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		r := renderExample(t, e)
		seen := map[bool]int{}
		for node, files := range r.files {
			for _, f := range files {
				if f.Path != onnode.KeepalivedConfPath {
					continue
				}
				in := false
				for _, line := range strings.Split(string(f.Data), "\n") {
					fields := strings.Fields(line)
					switch {
					case len(fields) == 2 && (fields[0] == "virtual_ipaddress" || fields[0] == "virtual_ipaddress_excluded") && fields[1] == "{":
						in = true
					case in && len(fields) == 1 && fields[0] == "}":
						in = false
					case in:
						p, err := netip.ParsePrefix(fields[0])
						if err != nil {
							t.Fatalf("%s %s: %q: %v", e, node, line, err)
						}
						seen[p.Addr().Is4()]++
						// VIPs outside every machine network live on an
						// interface of their own: br-dmz in the examples.
						dev := "br-dmz"
						for _, n := range r.config.Spec.MachineNetworks {
							if netip.MustParsePrefix(n).Contains(p.Addr()) {
								dev = "br-ex"
							}
						}
						want := []string{p.String(), "dev", dev, "label", onnode.VIPLabel}
						if p.Addr().Is6() {
							want = []string{p.Addr().String() + "/128", "dev", dev}
						}
						if strings.Join(fields, " ") != strings.Join(want, " ") {
							t.Errorf("%s %s: %q, want %q", e, node, strings.TrimSpace(line), strings.Join(want, " "))
						}
					}
				}
			}
		}
		if seen[true] == 0 {
			t.Errorf("%s: no IPv4 address checked", e)
		}
	}
}
