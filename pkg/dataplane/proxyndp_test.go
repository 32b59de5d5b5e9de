package dataplane

import (
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestFollowerProxiesIPv6ServiceAddresses: with the settings the
// MachineConfig ships (render.SysctlFiles, applied in the node's
// namespace as systemd-sysctl would), the follower answers for an IPv6
// Service address with a local route and a proxy neighbour entry, not an
// address on the interface: a client on the segment resolves it and is
// answered over TCP, the status's address list names it, and the
// unsolicited advertisements go out although the node may not send from
// an address it lacks (ip_nonlocal_bind 0: the socket's freebind) and
// move a client that knew the address elsewhere. IPv4
// Service addresses still go on the interface. An address left on the
// interface from before moves to a proxy entry; when the anchor leaves,
// the entry goes and the route stays for the grace; with the settings
// off, the addresses go back on the interface. Someone else's proxy
// entry is left alone; vipctl's go when the pool is no longer the
// sidecar's; Undrain keeps the routes of proxied addresses.
func TestFollowerProxiesIPv6ServiceAddresses(t *testing.T) {
	n, c, tn := followLab(t)
	cfg := &v1alpha1.ClusterVIPs{Spec: v1alpha1.ClusterVIPsSpec{VRRP: v1alpha1.VRRPSpec{Interface: "br-ex"}, ServicePools: []v1alpha1.ServicePool{
		{Name: "v6", Announce: v1alpha1.AnnounceSidecar, Addresses: []string{"2001:db8:100::1:0/112"}},
	}}}
	files := render.SysctlFiles(cfg)
	if len(files) != 1 {
		t.Fatalf("SysctlFiles for a sidecar-announced IPv6 pool: %d files, want 1", len(files))
	}
	if err := n.ApplySysctl(files[0].Data); err != nil {
		t.Fatal(err)
	}
	n.MustExec("sysctl", "-qw", "net.ipv6.ip_nonlocal_bind=0")
	cap := c.CaptureAnnouncements(t)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	svc4, svc6 := fixture.Addrs("198.51.100.130"), fixture.Addrs("2001:db8:100::1:5", "2001:db8:100::1:6")
	h := followHandover(anchor4, anchor6, svc4, svc6)
	// state is what the node shows: host addresses on br-ex, proxy
	// entries, and vipctl's IPv6 local routes.
	state := func() (onIf, proxies, routes []string) {
		for _, l := range strings.Split(string(n.MustExec("ip", "-o", "addr", "show", "dev", "br-ex")), "\n") {
			if f := strings.Fields(l); len(f) > 3 && (strings.HasSuffix(f[3], "/32") || strings.HasSuffix(f[3], "/128")) {
				onIf = append(onIf, strings.SplitN(f[3], "/", 2)[0])
			}
		}
		for _, l := range strings.Split(string(n.MustExec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex")), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				proxies = append(proxies, f[0])
			}
		}
		for _, l := range strings.Split(string(n.MustExec("ip", "-6", "route", "show", "table", "local", "proto", "118")), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				routes = append(routes, f[1])
			}
		}
		slices.Sort(onIf)
		slices.Sort(proxies)
		slices.Sort(routes)
		return
	}
	waitFor := func(what string, wantIf, wantProxies []string) {
		t.Helper()
		slices.Sort(wantIf)
		slices.Sort(wantProxies)
		deadline := time.Now().Add(5 * time.Second)
		for {
			onIf, proxies, _ := state()
			if slices.Equal(onIf, wantIf) && slices.Equal(proxies, wantProxies) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: host addresses on br-ex %v, proxy entries %v; want %v and %v", what, onIf, proxies, wantIf, wantProxies)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The takeover routes accept 2001:db8:100::1:5 already, as every
	// node's do for its instances' addresses: it is announced before its
	// proxy entry is made. The client knows it at some other MAC, as a
	// client of a failover does; the advertisement alone moves it.
	if err := ApplyTakeoverRoutes(tn, h); err != nil {
		t.Fatal(err)
	}
	c.MustExec("ip", "-6", "neigh", "replace", "2001:db8:100::1:5", "lladdr", "02:00:5e:00:00:99", "dev", c.Iface, "nud", "stale")
	l, stop := runLocal(t, tn, h)
	defer stop()

	// Left on the interface from before (the settings were off then);
	// and someone else's proxy entry in the pool's range, not vipctl's.
	n.MustExec("ip", "addr", "add", "2001:db8:100::1:6/128", "dev", "br-ex", "nodad")
	n.MustExec("ip", "-6", "neigh", "add", "proxy", "2001:db8:100::1:99", "dev", "br-ex")
	const other = "2001:db8:100::1:99"
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	waitFor("anchors added", []string{anchor4, anchor6, "198.51.100.130"}, []string{"2001:db8:100::1:5", "2001:db8:100::1:6", other})
	if _, _, routes := state(); !slices.Equal(routes, []string{"2001:db8:100::1:5", "2001:db8:100::1:6", anchor6}) {
		t.Errorf("vipctl's IPv6 local routes %v, want one per proxied address and the anchor's", routes)
	}
	if got := strings.TrimSpace(string(n.MustExec("cat", "/proc/sys/net/ipv6/neigh/br-ex/proxy_delay"))); got != "0" {
		t.Errorf("br-ex proxy_delay %s, want 0", got)
	}
	mac := linkMAC(t, n)
	for _, a := range svc6 {
		if got := cap.Wait(a, mac, onnode.GARPRepeat, 5*time.Second); got < onnode.GARPRepeat {
			t.Errorf("%s: %d unsolicited advertisements naming %s seen from the segment, want %d", a, got, mac, onnode.GARPRepeat)
		}
	}
	if got := string(c.MustExec("ip", "-6", "neigh", "show", "2001:db8:100::1:5", "dev", c.Iface)); !strings.Contains(got, "lladdr "+mac.String()) {
		t.Errorf("the client's neighbour entry for 2001:db8:100::1:5 after the advertisements: %q, want it at %s", got, mac)
	}
	var held []netip.Addr
	if err := n.Do(func() (err error) { held, err = LinkAddresses(); return err }); err != nil {
		t.Fatal(err)
	}
	for _, a := range svc6 {
		if !slices.Contains(held, a) {
			t.Errorf("LinkAddresses (the status's list) %v lacks the proxied %s", held, a)
		}
	}

	// A client that never heard of the address resolves it (the kernel
	// answers for the proxy entry) and is answered over TCP.
	var ln net.Listener
	if err := n.Do(func() (err error) { ln, err = net.Listen("tcp", "[::]:8080"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "n")
			_ = conn.Close()
		}
	}()
	c.MustExec("ip", "-6", "neigh", "flush", "dev", c.Iface)
	for _, a := range svc6 {
		conn, err := c.DialContext(t.Context(), "tcp", net.JoinHostPort(a.String(), "8080"))
		if err != nil {
			t.Fatalf("client to %s: %v", a, err)
		}
		got, err := io.ReadAll(conn)
		_ = conn.Close()
		if err != nil || string(got) != "n" {
			t.Errorf("client to %s: %q, %v", a, got, err)
		}
	}

	// The anchor leaves: the entries go, the routes stay for the grace.
	n.MustExec("ip", "addr", "del", anchor6+"/128", "dev", "br-ex")
	waitFor("IPv6 anchor gone", []string{anchor4, "198.51.100.130"}, []string{other})
	if _, _, routes := state(); len(routes) != 3 {
		t.Errorf("vipctl's IPv6 local routes %v right after the anchor left, want all three kept for the grace", routes)
	}

	// The settings off: the addresses go on the interface again.
	n.MustExec("sysctl", "-qw", "net.ipv6.conf.br-ex.forwarding=0")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	waitFor("settings off", []string{anchor4, anchor6, "198.51.100.130", "2001:db8:100::1:5", "2001:db8:100::1:6"}, []string{other})
	n.MustExec("sysctl", "-qw", "net.ipv6.conf.br-ex.forwarding=1")
	l.Kick()
	waitFor("settings on again", []string{anchor4, anchor6, "198.51.100.130"}, []string{"2001:db8:100::1:5", "2001:db8:100::1:6", other})

	// With the takeover routes Reconcile writes (they accept what arrives
	// on the interface), a failover writes the local routes after the
	// entries: they are there all the same once the sync is done.
	if err := ApplyTakeoverRoutes(tn, h); err != nil {
		t.Fatal(err)
	}
	n.MustExec("ip", "addr", "del", anchor6+"/128", "dev", "br-ex")
	waitFor("IPv6 anchor gone again", []string{anchor4, "198.51.100.130"}, []string{other})
	n.MustExec("ip", "-6", "route", "flush", "table", "local", "proto", "118")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	waitFor("IPv6 anchor back", []string{anchor4, anchor6, "198.51.100.130"}, []string{"2001:db8:100::1:5", "2001:db8:100::1:6", other})
	deadline := time.Now().Add(5 * time.Second)
	for _, _, routes := state(); len(routes) != 3 && time.Now().Before(deadline); _, _, routes = state() {
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, routes := state(); !slices.Equal(routes, []string{"2001:db8:100::1:5", "2001:db8:100::1:6", anchor6}) {
		t.Errorf("vipctl's IPv6 local routes after a takeover with the takeover routes in place: %v, want the proxied addresses' and the anchor's", routes)
	}

	// Undrain (a pod's start) removes vipctl's local routes but those of
	// proxied addresses, which nothing else would accept. The follower
	// still runs here and may give the anchor, which the node holds, its
	// route back at once (CI saw it do so between Undrain and the look).
	if err := Undrain(tn); err != nil {
		t.Fatal(err)
	}
	if _, _, routes := state(); !slices.Equal(slices.DeleteFunc(routes, func(r string) bool { return r == anchor6 }), []string{"2001:db8:100::1:5", "2001:db8:100::1:6"}) {
		t.Errorf("vipctl's IPv6 local routes after Undrain %v, want the proxied addresses' (and the held anchor's, if the follower restored it)", routes)
	}

	// The pool no longer announced by the sidecar (or gone): vipctl's
	// entries go with the next sync, the other one stays.
	h.SidecarRanges = nil
	for i := range h.Instances {
		h.Instances[i].Anchors, h.Instances[i].Sidecar = nil, nil
	}
	l.SetHandover(h)
	l.Kick()
	waitFor("pool no longer the sidecar's", []string{anchor4, anchor6, "198.51.100.130"}, []string{other})
}
