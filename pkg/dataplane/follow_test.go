package dataplane

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestFollowerAddsServiceAddressesWithTheAnchor: a pool with announce:
// sidecar, in namespaces, without keepalived (the test moves the anchors
// as keepalived would). The sidecar's LocalVIPs puts an instance's Service
// addresses on the interface when its anchor appears, announces each one
// (gratuitous ARP, unsolicited neighbour advertisement with Override, as
// captured on another host of the segment) at once and again GARPDelay
// later, gives them local routes, and removes them when the anchor leaves.
// A follower started afresh reconciles from the anchors alone: it removes
// what it finds without an anchor (also an address of a Service deleted
// meanwhile) and adds what a present anchor calls for. An address in the
// pool's range that keepalived adds itself (a Local Service's, in an
// instance of its own) is never the follower's to remove.
func TestFollowerAddsServiceAddressesWithTheAnchor(t *testing.T) {
	n, c, tn := followLab(t)
	cap := c.CaptureAnnouncements(t)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	svc4, svc6 := fixture.Addrs("198.51.100.130", "198.51.100.131"), fixture.Addrs("2001:db8:100::1:5")
	h := followHandover(anchor4, anchor6, svc4, svc6)
	const local = "198.51.100.150"
	h.Keepalived = fixture.Addrs(local)
	n.MustExec("ip", "addr", "add", local+"/32", "dev", "br-ex")
	onIf := func() []string {
		var out []string
		for _, l := range strings.Split(string(n.MustExec("ip", "-o", "addr", "show", "dev", "br-ex")), "\n") {
			if f := strings.Fields(l); len(f) > 3 && (strings.HasSuffix(f[3], "/32") || strings.HasSuffix(f[3], "/128")) {
				out = append(out, strings.SplitN(f[3], "/", 2)[0])
			}
		}
		slices.Sort(out)
		return out
	}
	waitFor := func(what string, want ...string) {
		t.Helper()
		slices.Sort(want)
		deadline := time.Now().Add(5 * time.Second)
		for !slices.Equal(onIf(), want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := onIf(); !slices.Equal(got, want) {
			t.Fatalf("%s: host addresses on br-ex %v, want %v", what, got, want)
		}
	}
	run := func() func() { _, stop := runLocal(t, tn, h); return stop }

	// Left from before: a Service address without its anchor, and one of
	// a Service no longer in the handover data. Neither is the sidecar's
	// to keep; the node's own addresses are not its business.
	n.MustExec("ip", "addr", "add", "198.51.100.131/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", "198.51.100.140/32", "dev", "br-ex")
	stop := run()
	waitFor("started without anchors", local)

	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	waitFor("anchors added", local, anchor4, anchor6, "198.51.100.130", "198.51.100.131", "2001:db8:100::1:5")
	mac := linkMAC(t, n)
	for _, a := range append(slices.Clone(svc4), svc6...) {
		// The second round follows GARPDelay after the first.
		if got := cap.Wait(a, mac, 2*onnode.GARPRepeat, 5*time.Second); got < 2*onnode.GARPRepeat {
			t.Errorf("%s: %d announcements naming %s seen from the segment, want %d (%d at once, as many %s later)", a, got, mac, 2*onnode.GARPRepeat, onnode.GARPRepeat, onnode.GARPDelay)
		}
	}
	if got := cap.Count(netip.MustParseAddr(anchor4), nil); got != 0 {
		t.Errorf("the anchor was announced %d times by the sidecar: it is keepalived's", got)
	}
	routes := string(n.MustExec("ip", "-4", "route", "show", "table", "local", "proto", "118"))
	for _, a := range svc4 {
		if !strings.Contains(routes, "local "+a.String()+" dev lo") {
			t.Errorf("no local route for %s: %q", a, routes)
		}
	}

	n.MustExec("ip", "addr", "del", anchor4+"/32", "dev", "br-ex")
	waitFor("IPv4 anchor gone", local, anchor6, "2001:db8:100::1:5")
	stop()

	// Away: the IPv4 anchor comes back, the IPv6 one goes.
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "del", anchor6+"/128", "dev", "br-ex")
	stop = run()
	defer stop()
	waitFor("restarted", local, anchor4, "198.51.100.130", "198.51.100.131")
}

// followLab is a node n and a client c on one segment, and n's target
// (drain file written) for a LocalVIPs.
func followLab(t *testing.T) (n, c *netlab.Host, tn host.Target) {
	t.Helper()
	lab := netlab.New(t)
	n = lab.AddHost("n", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	c = lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.99/24", "2001:db8:100::99/64"}})
	tn = labTarget(t, n)
	if err := tn.WriteFlag(onnode.DrainFile, false); err != nil {
		t.Fatal(err)
	}
	return n, c, tn
}

// followHandover is n's handover data for one sidecar pool of both
// families: an instance per family with its anchor and Service addresses.
func followHandover(anchor4, anchor6 string, svc4, svc6 []netip.Addr) onnode.Handover {
	r4, _ := v1alpha1.ParseAddressRange("198.51.100.128/26")
	r6, _ := v1alpha1.ParseAddressRange("2001:db8:100::1:0/112")
	return onnode.Handover{Interface: "br-ex", SidecarRanges: []v1alpha1.AddressRange{r4, r6}, Instances: []onnode.HandoverInstance{
		{Family: 4, VRID: 1, Priority: 50, VIPs: append(fixture.Addrs(anchor4), svc4...), Peers: fixture.Addrs("198.51.100.12"),
			Anchors: fixture.Addrs(anchor4), Sidecar: svc4},
		{Family: 6, VRID: 1, Priority: 50, VIPs: append(fixture.Addrs(anchor6), svc6...), Peers: fixture.Addrs("2001:db8:100::12"),
			Anchors: fixture.Addrs(anchor6), Sidecar: svc6},
	}}
}

// runLocal runs a LocalVIPs for tn with h (10 s grace) until the returned
// stop is called; a failed sync fails the test.
func runLocal(t *testing.T, tn host.Target, h onnode.Handover) (*LocalVIPs, func()) {
	l := NewLocalVIPs(tn, 10*time.Second)
	l.SetHandover(h)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, time.Hour, func(err error) { t.Errorf("LocalVIPs: %v", err) })
	}()
	return l, func() { cancel(); <-done }
}

func linkMAC(t *testing.T, h *netlab.Host) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := h.Do(func() error {
		link, err := net.InterfaceByName(h.Iface)
		mac = link.HardwareAddr
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// TestFollowerMarksItsAddressesNotTheNodes: every Service address the
// follower adds carries what OVN-Kubernetes takes for "not the node's own
// address" (onnode.VIPLabel): the IPv4 ones the label, the IPv6 ones
// (which have no labels) the deprecated flag, valid for ever, as
// keepalived leaves its /128 VIPs. Read back with `ip -j -d addr`, the
// way OVN-Kubernetes reads them over netlink; the node's own addresses,
// which the lab adds unmarked, must read as the node's.
func TestFollowerMarksItsAddressesNotTheNodes(t *testing.T) {
	n, _, tn := followLab(t)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	svc4, svc6 := fixture.Addrs("198.51.100.130"), fixture.Addrs("2001:db8:100::1:5")
	_, stop := runLocal(t, tn, followHandover(anchor4, anchor6, svc4, svc6))
	defer stop()
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	want := append(slices.Clone(svc4), svc6...)
	var addrs []netlab.Addr
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if addrs, err = n.Addrs("br-ex"); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, a := range addrs {
			if slices.Contains(want, a.Addr) {
				found++
			}
		}
		if found == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Service addresses %v not all on br-ex: %v", want, addrs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, a := range addrs {
		switch {
		case slices.Contains(want, a.Addr):
			if !a.MarkedNotNodes() {
				t.Errorf("%s: added by the follower, but OVN-Kubernetes would take it for a node address", a)
			}
			if a.Addr.Is4() && a.Label != onnode.VIPLabel {
				t.Errorf("%s: label %q, want %q", a, a.Label, onnode.VIPLabel)
			}
			if a.Addr.Is6() && (a.Preferred != 0 || a.Valid != 0xffffffff || a.PrefixLen != 128) {
				t.Errorf("%s: want a /128, preferred lifetime 0, valid for ever", a)
			}
		case a.Addr.String() == "198.51.100.11" || a.Addr.String() == "2001:db8:100::11":
			if a.MarkedNotNodes() {
				t.Errorf("%s: the node's own address reads as a VIP: the check proves nothing", a)
			}
		}
	}
}

// TestFollowerAddsEarly: a Service address handed over ahead of its
// render (AddEarly, as the sidecar does when its Service gets it) asks
// for an early sync where its anchor is held, and that sync, which lists
// nothing, puts it in place: the IPv4 one on the interface, the IPv6 one
// as a proxy entry with its local route (the node's settings allow it),
// each announced in a full round, as a client on the segment hears. One
// naming an anchor of no instance here asks for nothing and is not
// added. A render read before the address came keeps it
// (SetHandoverAsOf); one read after decides, and without the address
// removes it. The syncs are called one by one here (Run would also sync
// on the address notifications), so that each step is the one checked.
func TestFollowerAddsEarly(t *testing.T) {
	n, c, tn := followLab(t)
	cfg := &v1alpha1.ClusterVIPs{Spec: v1alpha1.ClusterVIPsSpec{VRRP: v1alpha1.VRRPSpec{Interface: "br-ex"}, ServicePools: []v1alpha1.ServicePool{
		{Name: "v6", Announce: v1alpha1.AnnounceSidecar, Addresses: []string{"2001:db8:100::1:0/112"}},
	}}}
	if err := n.ApplySysctl(render.SysctlFiles(cfg)[0].Data); err != nil {
		t.Fatal(err)
	}
	cap := c.CaptureAnnouncements(t)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	h := followHandover(anchor4, anchor6, fixture.Addrs("198.51.100.130"), fixture.Addrs("2001:db8:100::1:5"))
	l := NewLocalVIPs(tn, 10*time.Second)
	var log fixture.LogBuffer
	l.SetLog(slog.New(slog.NewTextHandler(&log, nil)))
	l.SetHandover(h)
	sync := func() {
		t.Helper()
		if err := l.Sync(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	sync()
	waitFollowed(t, n, true, "198.51.100.130", "2001:db8:100::1:5")

	asked := func() bool {
		select {
		case <-l.early:
			return true
		default:
			return false
		}
	}
	seen := time.Now()
	l.AddEarly(netip.MustParseAddr("198.51.100.133"), netip.MustParseAddr("198.51.100.190"), seen)
	if asked() {
		t.Error("an address of an anchor not held here asked for an early sync")
	}
	l.AddEarly(netip.MustParseAddr("198.51.100.132"), netip.MustParseAddr(anchor4), seen)
	l.AddEarly(netip.MustParseAddr("2001:db8:100::1:7"), netip.MustParseAddr(anchor6), seen)
	if !asked() {
		t.Error("addresses of held anchors asked for no early sync")
	}
	before := len(log.String())
	if err := l.earlySync(); err != nil {
		t.Fatal(err)
	}
	if since := log.String()[before:]; !strings.Contains(since, "added=2 ahead_of_render=true") {
		t.Errorf("the early sync did not add both addresses; LocalVIPs logged:\n%s", since)
	}
	waitFollowed(t, n, true, "198.51.100.132", "2001:db8:100::1:7")
	mac := linkMAC(t, n)
	for _, a := range fixture.Addrs("198.51.100.132", "2001:db8:100::1:7") {
		if got := cap.Wait(a, mac, onnode.GARPRepeat, 5*time.Second); got < onnode.GARPRepeat {
			t.Errorf("%s: %d announcements naming %s seen from the segment, want %d", a, got, mac, onnode.GARPRepeat)
		}
	}
	if routes := string(n.MustExec("ip", "-6", "route", "show", "table", "local", "proto", "118")); !strings.Contains(routes, "2001:db8:100::1:7 dev lo") {
		t.Errorf("no local route for the proxied 2001:db8:100::1:7: %q", routes)
	}

	l.SetHandoverAsOf(h, seen.Add(-time.Second))
	sync()
	waitFollowed(t, n, true, "198.51.100.132", "2001:db8:100::1:7")
	waitFollowed(t, n, false, "198.51.100.133")

	l.SetHandoverAsOf(h, seen.Add(time.Millisecond))
	sync()
	waitFollowed(t, n, false, "198.51.100.132", "2001:db8:100::1:7")
	waitFollowed(t, n, true, "198.51.100.130", "2001:db8:100::1:5")
}

// waitFollowed waits up to 5 s until every address is answered on br-ex
// (on: on the interface or a proxy entry there) or none is (!on), and
// fails the test otherwise.
func waitFollowed(t *testing.T, n *netlab.Host, on bool, addrs ...string) {
	t.Helper()
	var out string
	deadline := time.Now().Add(5 * time.Second)
	for {
		out = string(n.MustExec("ip", "-o", "addr", "show", "dev", "br-ex")) + string(n.MustExec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex"))
		ok := true
		for _, a := range addrs {
			ok = ok && (strings.Contains(out, " "+a+"/") || strings.Contains(out, "\n"+a+" ") || strings.HasPrefix(out, a+" ")) == on
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %v answered on br-ex %t; it has:\n%s", addrs, on, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAnnouncementsMoveNeighbours: a host on the segment whose neighbour
// entries for two addresses (one per family) name another MAC moves them
// to the node's on its announcements: the receiving kernel drops a
// neighbour advertisement unless it is valid (RFC 4861 7.1.2: hop limit
// 255, the checksum) and moves an entry only with the Override flag.
func TestAnnouncementsMoveNeighbours(t *testing.T) {
	n, c, _ := followLab(t)
	addrs := fixture.Addrs("198.51.100.140", "2001:db8:100::1:40")
	for _, a := range addrs {
		n.MustExec("ip", "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "br-ex", "nodad")
		c.MustExec("ip", "neigh", "replace", a.String(), "lladdr", "02:00:00:00:00:99", "dev", "br-ex", "nud", "stale")
	}
	var mac string
	if err := n.Do(func() error {
		link, err := netlink.LinkByName("br-ex")
		if err != nil {
			return err
		}
		mac = link.Attrs().HardwareAddr.String()
		return announce(link, addrs, 1)
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		deadline := time.Now().Add(2 * time.Second)
		var out string
		for {
			out = string(c.MustExec("ip", "neigh", "show", a.String(), "dev", "br-ex"))
			if strings.Contains(out, mac) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(out, mac) {
			t.Errorf("%s: the client's neighbour entry %q, want the node's %s", a, strings.TrimSpace(out), mac)
		}
	}
}

// TestAnnounceDueWithoutSync: the announcements due after a sync (a new
// address's second round, the refreshes) go out from the interface's
// addresses alone while the follower's addresses are exactly what the
// held anchors call for; once an anchor has left, or the handover names
// an address not yet added, it announces nothing and leaves the work to
// a sync.
func TestAnnounceDueWithoutSync(t *testing.T) {
	n, c, tn := followLab(t)
	cap := c.CaptureAnnouncements(t)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	svc4, svc6 := fixture.Addrs("198.51.100.130"), fixture.Addrs("2001:db8:100::1:5")
	h := followHandover(anchor4, anchor6, svc4, svc6)
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	l := NewLocalVIPs(tn, 10*time.Second)
	l.SetHandover(h)
	now := time.Now()
	if err := l.Sync(now); err != nil {
		t.Fatal(err)
	}
	mac := linkMAC(t, n)
	both := append(slices.Clone(svc4), svc6...)
	for _, a := range both {
		if got := cap.Wait(a, mac, onnode.GARPRepeat, 5*time.Second); got != onnode.GARPRepeat {
			t.Fatalf("%s: %d announcements after the sync, want %d", a, got, onnode.GARPRepeat)
		}
	}

	// The second round, without a sync (the first went out after now).
	now = time.Now().Add(onnode.GARPDelay)
	if done, err := l.announceDue(now); !done || err != nil {
		t.Fatalf("second round: done %v, %v; want done without a sync", done, err)
	}
	for _, a := range both {
		if got := cap.Wait(a, mac, 2*onnode.GARPRepeat, 5*time.Second); got != 2*onnode.GARPRepeat {
			t.Errorf("%s: %d announcements after the second round, want %d", a, got, 2*onnode.GARPRepeat)
		}
	}

	// The IPv4 anchor leaves: its address is a sync's to remove, and not
	// to be refreshed meanwhile.
	n.MustExec("ip", "addr", "del", anchor4+"/32", "dev", "br-ex")
	now = now.Add(onnode.GARPRefresh)
	if done, err := l.announceDue(now); done || err != nil {
		t.Errorf("anchor gone: done %v, %v; want a sync", done, err)
	}
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")

	// A Service address the follower has not added yet.
	l.SetHandover(followHandover(anchor4, anchor6, fixture.Addrs("198.51.100.130", "198.51.100.131"), svc6))
	if done, err := l.announceDue(now); done || err != nil {
		t.Errorf("address not added yet: done %v, %v; want a sync", done, err)
	}
	time.Sleep(200 * time.Millisecond) // what was sent has arrived
	for _, a := range both {
		if got := cap.Count(a, mac); got != 2*onnode.GARPRepeat {
			t.Errorf("%s: %d announcements, want still %d", a, got, 2*onnode.GARPRepeat)
		}
	}

	// Back as it was: the refresh, one advertisement each.
	l.SetHandover(h)
	if done, err := l.announceDue(now); !done || err != nil {
		t.Fatalf("refresh: done %v, %v; want done without a sync", done, err)
	}
	for _, a := range both {
		if got := cap.Wait(a, mac, 2*onnode.GARPRepeat+onnode.GARPRefreshRepeat, 5*time.Second); got != 2*onnode.GARPRepeat+onnode.GARPRefreshRepeat {
			t.Errorf("%s: %d announcements after the refresh, want %d", a, got, 2*onnode.GARPRepeat+onnode.GARPRefreshRepeat)
		}
	}
}
