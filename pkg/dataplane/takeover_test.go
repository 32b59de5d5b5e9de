package dataplane

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestTakeoverRoutesAcceptTheFirstSYN builds the worst case of the IPv6
// gap by hand: the client's neighbour entry for the VIP already points at
// node b (it heard b's advertisement) while b has no address for the VIP
// at all, as in the milliseconds before the kernel makes a new address
// deliverable. With b's takeover routes the client's connection is
// answered by b; without them (the control, before Apply and after the
// VIP left the config) b drops the SYN. b's own traffic to the VIP is not
// routed to itself, and an IPv4 VIP gets no route (ARP would answer for
// it). Rewrites are idempotent; an empty Handover removes rule and routes.
func TestTakeoverRoutesAcceptTheFirstSYN(t *testing.T) {
	lab := netlab.New(t)
	b := lab.AddHost("b", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.12/24", "2001:db8:100::12/64"}})
	client := lab.AddHost("client", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	const vip6, vip4, other6 = "2001:db8:100::5", "198.51.100.5", "2001:db8:100::6"
	handover := func(vips ...string) onnode.Handover {
		h := onnode.Handover{Interface: "br-ex"}
		for i, v := range vips {
			a := netip.MustParseAddr(v)
			family, peer := 6, "2001:db8:100::11"
			if a.Is4() {
				family, peer = 4, "198.51.100.11"
			}
			h.Instances = append(h.Instances, onnode.HandoverInstance{Family: family, VRID: uint8(51 + i), Priority: 88,
				VIPs: []netip.Addr{a}, Peers: []netip.Addr{netip.MustParseAddr(peer)}})
		}
		return h
	}
	tb := labTarget(t, b)
	serveName(b)
	client.MustExec("ip", "-6", "neigh", "replace", vip6, "lladdr", mac(t, b, "br-ex"), "dev", "eth0")
	answers := func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		c, err := client.DialContext(ctx, "tcp", net.JoinHostPort(vip6, "8080"))
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	if answers() {
		t.Fatal("b answered for a VIP it neither holds nor routes: the control is broken")
	}
	for range 2 { // the second rewrite changes nothing
		if err := ApplyTakeoverRoutes(tb, handover(vip6, vip4, other6)); err != nil {
			t.Fatal(err)
		}
	}
	if !answers() {
		t.Error("with takeover routes, b did not answer the SYN for the VIP it is taking over")
	}
	for _, c := range []struct{ args, want string }{
		{"-6 rule", "from all iif br-ex lookup 30326"},
		{"-6 route show table 30326", "local 2001:db8:100::5 dev lo"},
		{"-6 route show table 30326", "local 2001:db8:100::6 dev lo"},
	} {
		if out := string(b.MustExec(append([]string{"ip"}, strings.Fields(c.args)...)...)); !strings.Contains(out, c.want) {
			t.Errorf("ip %s: want %q in\n%s", c.args, c.want, out)
		}
	}
	if out := string(b.MustExec("ip", "-6", "rule")); strings.Count(out, "lookup 30326") != 1 {
		t.Errorf("want one rule to table 30326 after two writes:\n%s", out)
	}
	if out := string(b.MustExec("ip", "-6", "route", "get", vip6)); strings.HasPrefix(out, "local") {
		t.Errorf("b's own traffic to the VIP is routed to itself: %s", out)
	}
	// (Not forwarding, b has no route at all for a foreign address from br-ex.)
	if out, _ := b.Exec("ip", "route", "get", vip4, "from", "198.51.100.100", "iif", "br-ex"); strings.HasPrefix(string(out), "local") {
		t.Errorf("an IPv4 VIP arriving on br-ex is local, so b would answer ARP for it: %s", out)
	}

	if err := ApplyTakeoverRoutes(tb, handover(vip4, other6)); err != nil {
		t.Fatal(err)
	}
	if answers() {
		t.Error("b still answers for a VIP that left its instances")
	}
	if err := ApplyTakeoverRoutes(tb, onnode.Handover{Interface: "br-ex"}); err != nil {
		t.Fatal(err)
	}
	routes, _ := b.Exec("ip", "-6", "route", "show", "table", "30326") // an error when the table is gone
	if out := string(b.MustExec("ip", "-6", "rule")) + string(routes); strings.Contains(out, "30326") || strings.Contains(out, "2001:db8") {
		t.Errorf("an empty Handover left rule or routes:\n%s", out)
	}
}

// TestTakeoverWriterChangesTheDifference: one writer, as the sidecar keeps
// it across syncs. After its first write it adds and removes only the
// routes whose VIPs came and went, and leaves the rest as they are; a
// route someone else removed comes back once the writer reads the table
// again (a new writer here, LocalResync later in the sidecar), and an
// empty Handover still removes rule and routes.
func TestTakeoverWriterChangesTheDifference(t *testing.T) {
	lab := netlab.New(t)
	b := lab.AddHost("b", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"2001:db8:100::12/64"}})
	tb := labTarget(t, b)
	handover := func(vips ...string) onnode.Handover {
		h := onnode.Handover{Interface: "br-ex"}
		for _, v := range vips {
			h.Instances = append(h.Instances, onnode.HandoverInstance{Family: 6, VRID: 51, Priority: 88,
				VIPs: []netip.Addr{netip.MustParseAddr(v)}, Peers: []netip.Addr{netip.MustParseAddr("2001:db8:100::11")}})
		}
		return h
	}
	routes := func() []string {
		out, _ := b.Exec("ip", "-6", "route", "show", "table", "30326")
		var dst []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				dst = append(dst, f[1])
			}
		}
		return dst
	}
	want := func(what string, vips ...string) {
		t.Helper()
		if got := routes(); strings.Join(got, " ") != strings.Join(vips, " ") {
			t.Errorf("%s: routes to %v, want %v", what, got, vips)
		}
	}
	w := NewTakeoverWriter(tb)
	if err := w.Apply(handover("2001:db8:100::5", "2001:db8:100::6")); err != nil {
		t.Fatal(err)
	}
	want("first write", "2001:db8:100::5", "2001:db8:100::6")
	b.MustExec("ip", "-6", "route", "del", "local", "2001:db8:100::5", "dev", "lo", "table", "30326", "proto", "118")
	if err := w.Apply(handover("2001:db8:100::5", "2001:db8:100::7")); err != nil {
		t.Fatal(err)
	}
	want("one VIP gone, one new, one route removed behind the writer's back: only the difference", "2001:db8:100::7")
	if err := NewTakeoverWriter(tb).Apply(handover("2001:db8:100::5", "2001:db8:100::7")); err != nil {
		t.Fatal(err)
	}
	want("the table read again", "2001:db8:100::5", "2001:db8:100::7")
	if err := w.Apply(onnode.Handover{Interface: "br-ex"}); err != nil {
		t.Fatal(err)
	}
	if out := string(b.MustExec("ip", "-6", "rule")); strings.Contains(out, "30326") || len(routes()) > 0 {
		t.Errorf("an empty Handover left rule or routes: %s %v", out, routes())
	}
}
