package dataplane

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestInternalGuard: on a control-plane node holding the API VIP and
// api-int's own VIP, with the redirects in place, a client inside the
// allow-list reaches the machine config server through both VIPs, on the
// node's own address (22623 and its plain port 22624) and haproxy's port;
// a client on the same segment outside it is refused (a TCP reset, not a
// timeout) on all of those and on api-int's API port, yet still reaches
// the API VIP's 6443; the node itself reaches everything over lo. IPv4
// and IPv6. A connection the node only forwards to a guarded port of
// another host passes. Without the guard the outsider gets through again.
func TestInternalGuard(t *testing.T) {
	lab, node, inside := nodeAndClient(t)
	outside := lab.AddHost("outside", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.200/24", "2001:db8:100::1:200/64"}})
	// api-int's own VIPs beside the API's.
	node.MustExec("ip", "addr", "add", "198.51.100.4/32", "dev", "br-ex")
	node.MustExec("ip", "addr", "add", "2001:db8:100::4/128", "dev", "br-ex", "nodad")
	for port, body := range map[string]string{"6443": "apiserver", "9445": "haproxy-api", "22623": "mcs", "22624": "mcs-plain", "22625": "haproxy-mcs"} {
		node.ServeText(t, ":"+port, body)
	}
	get := func(h *netlab.Host, addr, port string) string {
		return h.Get("http://" + net.JoinHostPort(addr, port) + "/")
	}
	ns := netnsOf(t, node)

	var redirects []onnode.PortRedirect
	for _, vip := range []string{"198.51.100.5", "198.51.100.4", "2001:db8:100::5", "2001:db8:100::4"} {
		redirects = append(redirects,
			onnode.PortRedirect{VIP: netip.MustParseAddr(vip), From: 6443, To: 9445},
			onnode.PortRedirect{VIP: netip.MustParseAddr(vip), From: 22623, To: 22625})
	}
	guard := &onnode.InternalGuard{
		Ports: []uint16{22623, 22625, 22624},
		VIPs:  []netip.Addr{netip.MustParseAddr("198.51.100.4"), netip.MustParseAddr("2001:db8:100::4")},
		// The machine networks given narrower, the node's own addresses
		// on top (inside one of them, as render gives them).
		Allowed: []netip.Prefix{
			netip.MustParsePrefix("198.51.100.0/25"), netip.MustParsePrefix("198.51.100.11/32"),
			netip.MustParsePrefix("2001:db8:100::/112"), netip.MustParsePrefix("2001:db8:100::11/128"),
		},
	}
	type want struct{ inside, outside string }
	cases := map[string]map[string]want{ // address -> port -> answers
		"198.51.100.5":     {"6443": {"haproxy-api", "haproxy-api"}, "22623": {"haproxy-mcs", "refused"}},
		"198.51.100.4":     {"6443": {"haproxy-api", "refused"}, "22623": {"haproxy-mcs", "refused"}},
		"198.51.100.11":    {"6443": {"apiserver", "apiserver"}, "22623": {"mcs", "refused"}, "22624": {"mcs-plain", "refused"}, "22625": {"haproxy-mcs", "refused"}},
		"2001:db8:100::5":  {"6443": {"haproxy-api", "haproxy-api"}, "22623": {"haproxy-mcs", "refused"}},
		"2001:db8:100::4":  {"6443": {"haproxy-api", "refused"}, "22623": {"haproxy-mcs", "refused"}},
		"2001:db8:100::11": {"6443": {"apiserver", "apiserver"}, "22623": {"mcs", "refused"}, "22624": {"mcs-plain", "refused"}, "22625": {"haproxy-mcs", "refused"}},
	}
	for range 2 { // twice: replacing the table must be idempotent
		if err := EnsureAPITable(int(ns), redirects, guard); err != nil {
			t.Fatal(err)
		}
		for addr, ports := range cases {
			for port, w := range ports {
				if got := get(inside, addr, port); got != w.inside {
					t.Errorf("inside the allow-list, %s port %s: %q, want %q", addr, port, got, w.inside)
				}
				if got := get(outside, addr, port); got != w.outside {
					t.Errorf("outside the allow-list, %s port %s: %q, want %q", addr, port, got, w.outside)
				}
				if got := get(node, addr, port); got != w.inside {
					t.Errorf("the node itself, %s port %s: %q, want %q", addr, port, got, w.inside)
				}
			}
		}
	}
	// A connection the node only forwards, to a port it guards on its own
	// addresses, passes: 203.0.113.7 lives on another host, reached
	// through the node.
	behind := lab.AddHost("behind", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.150/24"}})
	behind.MustExec("ip", "addr", "add", "203.0.113.7/32", "dev", "eth0")
	behind.ServeText(t, "203.0.113.7:22623", "behind")
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.br-ex.send_redirects=0"} {
		node.MustExec("sysctl", "-qw", kv)
	}
	node.MustExec("ip", "route", "add", "203.0.113.7/32", "via", "198.51.100.150")
	outside.MustExec("ip", "route", "add", "203.0.113.7/32", "via", "198.51.100.11")
	if got := get(outside, "203.0.113.7", "22623"); got != "behind" {
		t.Errorf("outside the allow-list, forwarded by the node to 203.0.113.7:22623: %q, want %q", got, "behind")
	}
	if err := EnsureAPITable(int(ns), redirects, nil); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"198.51.100.4", "2001:db8:100::11"} {
		if got := get(outside, addr, "22623"); got == "refused" {
			t.Errorf("without the guard, %s:22623 still refuses the outsider", addr)
		}
	}
}

// TestIntervalElements: overlapping and adjacent prefixes become one
// interval each (the kernel refuses overlaps), a range running to the end
// of the address space has no end element, and families stay apart.
func TestIntervalElements(t *testing.T) {
	t.Parallel()
	in := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/25"),
		netip.MustParsePrefix("198.51.100.11/32"),
		netip.MustParsePrefix("198.51.100.128/26"),
		netip.MustParsePrefix("203.0.113.7/32"),
		netip.MustParsePrefix("255.255.255.0/24"),
		netip.MustParsePrefix("2001:db8::/64"),
	}
	show := func(els []nftables.SetElement) string {
		var parts []string
		for _, e := range els {
			a, _ := netip.AddrFromSlice(e.Key)
			if e.IntervalEnd {
				parts = append(parts, "end "+a.String())
			} else {
				parts = append(parts, a.String())
			}
		}
		return strings.Join(parts, ", ")
	}
	if got, want := show(intervalElements(in, true)), "198.51.100.0, end 198.51.100.192, 203.0.113.7, end 203.0.113.8, 255.255.255.0"; got != want {
		t.Errorf("IPv4: %s\nwant: %s", got, want)
	}
	if got, want := show(intervalElements(in, false)), "2001:db8::, end 2001:db8:0:1::"; got != want {
		t.Errorf("IPv6: %s\nwant: %s", got, want)
	}
}
