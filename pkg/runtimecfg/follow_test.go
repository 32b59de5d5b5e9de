package runtimecfg

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/internal/fixture"
	"github.com/vipctl/vipctl/internal/netlab"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
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
// meanwhile) and adds what a present anchor calls for.
func TestFollowerAddsServiceAddressesWithTheAnchor(t *testing.T) {
	n, c, tn := followLab(t)
	cap := capture(t, c)
	anchor4, anchor6 := "198.51.100.191", "2001:db8:100::1:ffff"
	svc4, svc6 := fixture.Addrs("198.51.100.130", "198.51.100.131"), fixture.Addrs("2001:db8:100::1:5")
	h := followHandover(anchor4, anchor6, svc4, svc6)
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
	waitFor("started without anchors")

	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "add", anchor6+"/128", "dev", "br-ex", "nodad")
	waitFor("anchors added", anchor4, anchor6, "198.51.100.130", "198.51.100.131", "2001:db8:100::1:5")
	mac := linkMAC(t, n)
	for _, a := range append(slices.Clone(svc4), svc6...) {
		// The second round follows GARPDelay after the first.
		if got := cap.wait(a, mac, 2*render.GARPRepeat, 5*time.Second); got < 2*render.GARPRepeat {
			t.Errorf("%s: %d announcements naming %s seen from the segment, want %d (%d at once, as many %s later)", a, got, mac, 2*render.GARPRepeat, render.GARPRepeat, render.GARPDelay)
		}
	}
	if got := cap.count(netip.MustParseAddr(anchor4), nil); got != 0 {
		t.Errorf("the anchor was announced %d times by the sidecar: it is keepalived's", got)
	}
	routes := string(n.MustExec("ip", "-4", "route", "show", "table", "local", "proto", "118"))
	for _, a := range svc4 {
		if !strings.Contains(routes, "local "+a.String()+" dev lo") {
			t.Errorf("no local route for %s: %q", a, routes)
		}
	}

	n.MustExec("ip", "addr", "del", anchor4+"/32", "dev", "br-ex")
	waitFor("IPv4 anchor gone", anchor6, "2001:db8:100::1:5")
	stop()

	// Away: the IPv4 anchor comes back, the IPv6 one goes.
	n.MustExec("ip", "addr", "add", anchor4+"/32", "dev", "br-ex")
	n.MustExec("ip", "addr", "del", anchor6+"/128", "dev", "br-ex")
	stop = run()
	defer stop()
	waitFor("restarted", anchor4, "198.51.100.130", "198.51.100.131")
}

// followLab is a node n and a client c on one segment, and n's target
// (drain file written) for a LocalVIPs.
func followLab(t *testing.T) (n, c *netlab.Host, tn Target) {
	t.Helper()
	lab := netlab.New(t)
	n = lab.AddHost("n", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	c = lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.99/24", "2001:db8:100::99/64"}})
	tn = labTarget(t, n)
	if err := writeRunFile(tn, render.DrainFile, false); err != nil {
		t.Fatal(err)
	}
	return n, c, tn
}

// followHandover is n's handover data for one sidecar pool of both
// families: an instance per family with its anchor and Service addresses.
func followHandover(anchor4, anchor6 string, svc4, svc6 []netip.Addr) render.Handover {
	r4, _ := v1alpha1.ParseAddressRange("198.51.100.128/26")
	r6, _ := v1alpha1.ParseAddressRange("2001:db8:100::1:0/112")
	return render.Handover{Interface: "br-ex", SidecarRanges: []v1alpha1.AddressRange{r4, r6}, Instances: []render.HandoverInstance{
		{Family: 4, VRID: 1, Priority: 50, VIPs: append(fixture.Addrs(anchor4), svc4...), Peers: fixture.Addrs("198.51.100.12"),
			Anchors: fixture.Addrs(anchor4), Sidecar: svc4},
		{Family: 6, VRID: 1, Priority: 50, VIPs: append(fixture.Addrs(anchor6), svc6...), Peers: fixture.Addrs("2001:db8:100::12"),
			Anchors: fixture.Addrs(anchor6), Sidecar: svc6},
	}}
}

// runLocal runs a LocalVIPs for tn with h (10 s grace) until the returned
// stop is called; a failed sync fails the test.
func runLocal(t *testing.T, tn Target, h render.Handover) (*LocalVIPs, func()) {
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

// capture records the gratuitous ARP and unsolicited neighbour
// advertisements a host receives: who (sender hardware address) said
// each address is where.
type captured struct {
	mu   sync.Mutex
	seen map[netip.Addr][]string
	// first is when each address was first announced.
	first map[netip.Addr]time.Time
}

func capture(t testing.TB, h *netlab.Host) *captured {
	t.Helper()
	var fd int
	if err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		link, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: link.Index})
	}); err != nil {
		t.Fatal(err)
	}
	// Room for thousands of announcements at once (BenchmarkFollowerBurst).
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	c := &captured{seen: map[netip.Addr][]string{}, first: map[netip.Addr]time.Time{}}
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if a, mac, ok := parseAnnouncement(buf[:k]); ok {
				c.mu.Lock()
				if len(c.seen[a]) == 0 {
					c.first[a] = time.Now()
				}
				c.seen[a] = append(c.seen[a], mac)
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; _ = unix.Close(fd) })
	return c
}

// parseAnnouncement reads a gratuitous ARP request (sender and target
// the same address) or an unsolicited neighbour advertisement to all
// nodes with the Override flag and a target link-layer address.
func parseAnnouncement(f []byte) (netip.Addr, string, bool) {
	if len(f) < 14 {
		return netip.Addr{}, "", false
	}
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_ARP:
		arp := f[14:]
		if len(arp) < 28 || binary.BigEndian.Uint16(arp[6:8]) != 1 {
			return netip.Addr{}, "", false
		}
		spa, tpa := netip.AddrFrom4([4]byte(arp[14:18])), netip.AddrFrom4([4]byte(arp[24:28]))
		return spa, net.HardwareAddr(arp[8:14]).String(), spa == tpa
	case unix.ETH_P_IPV6:
		ip6 := f[14:]
		if len(ip6) < 40+32 || ip6[6] != unix.IPPROTO_ICMPV6 || ip6[7] != 255 {
			return netip.Addr{}, "", false
		}
		dst := netip.AddrFrom16([16]byte(ip6[24:40]))
		icmp := ip6[40:]
		if icmp[0] != 136 || icmp[4]&0x20 == 0 || dst != netip.MustParseAddr("ff02::1") || icmp[24] != 2 {
			return netip.Addr{}, "", false
		}
		return netip.AddrFrom16([16]byte(icmp[8:24])), net.HardwareAddr(icmp[26:32]).String(), true
	}
	return netip.Addr{}, "", false
}

// count is how many announcements of a named mac (any, if nil) were seen.
func (c *captured) count(a netip.Addr, mac net.HardwareAddr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for _, m := range c.seen[a] {
		if mac == nil || m == mac.String() {
			k++
		}
	}
	return k
}

// wait waits up to d for at least want announcements of a at mac.
func (c *captured) wait(a netip.Addr, mac net.HardwareAddr, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for c.count(a, mac) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return c.count(a, mac)
}

// lastFirst is when the last of addrs was first announced after t0 (zero
// if one was not).
func (c *captured) lastFirst(addrs []netip.Addr, t0 time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for _, a := range addrs {
		at, ok := c.first[a]
		if !ok || at.Before(t0) {
			return time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// forget drops what was seen so far.
func (c *captured) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.seen)
	clear(c.first)
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
