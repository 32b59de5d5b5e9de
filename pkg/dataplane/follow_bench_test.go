package dataplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/netlab"
)

// BenchmarkFollowerBurst: one sync of a node whose anchor just appeared,
// with 2500 Service addresses to add, announce and give local routes, as
// after a failover, while the node already holds another instance of
// 2500 (the survivor of BenchmarkScale's node loss); then one whose anchor
// just left. IPv6 addresses on the interface (mode=addresses) or answered
// by proxy entries (mode=proxy, the MachineConfig's settings applied and
// the takeover routes in place, as Reconcile leaves them).
//
//	go test -run '^$' -bench BenchmarkFollowerBurst -benchtime 5x ./pkg/runtimecfg/
func BenchmarkFollowerBurst(b *testing.B) {
	for _, mode := range []string{"addresses", "proxy"} {
		b.Run(mode, func(b *testing.B) { benchFollowerBurst(b, mode) })
	}
}

func benchFollowerBurst(b *testing.B, mode string) {
	lab := netlab.New(b)
	n := lab.AddHost("n", netlab.HostOpts{Addrs: []string{"2001:db8:100::11/64"}})
	c := lab.AddHost("c", netlab.HostOpts{Addrs: []string{"2001:db8:100::99/64"}})
	if mode == "proxy" {
		cfg := &v1alpha1.ClusterVIPs{Spec: v1alpha1.ClusterVIPsSpec{ServicePools: []v1alpha1.ServicePool{
			{Name: "v6", Announce: v1alpha1.AnnounceSidecar, Addresses: []string{"2001:db8:100::1:0/112"}},
		}}}
		if err := n.ApplySysctl(render.SysctlFiles(cfg)[0].Data); err != nil {
			b.Fatal(err)
		}
	}
	tn := host.Target{Root: b.TempDir(), Netns: n.NS}
	r6, _ := v1alpha1.ParseAddressRange("2001:db8:100::1:0/112")
	instance := func(vrid uint8, first string, anchor netip.Addr) onnode.HandoverInstance {
		var svc []netip.Addr
		for a, i := netip.MustParseAddr(first), 0; i < 2500; a, i = a.Next(), i+1 {
			svc = append(svc, a)
		}
		return onnode.HandoverInstance{Family: 6, VRID: vrid, Priority: 50, VIPs: append([]netip.Addr{anchor}, svc...),
			Peers: []netip.Addr{netip.MustParseAddr("2001:db8:100::12")}, Anchors: []netip.Addr{anchor}, Sidecar: svc}
	}
	held, anchor := netip.MustParseAddr("2001:db8:100::1:fffe"), netip.MustParseAddr("2001:db8:100::1:ffff")
	h := onnode.Handover{Interface: "br-ex", SidecarRanges: []v1alpha1.AddressRange{r6}, Instances: []onnode.HandoverInstance{
		instance(1, "2001:db8:100::1:0", anchor), instance(2, "2001:db8:100::1:8000", held),
	}}
	if err := ApplyTakeoverRoutes(tn, h); err != nil {
		b.Fatal(err)
	}
	l := NewLocalVIPs(tn, time.Millisecond)
	l.SetHandover(h)
	n.MustExec("ip", "addr", "add", held.String()+"/128", "dev", "br-ex", "nodad")
	if err := l.Sync(time.Now()); err != nil {
		b.Fatal(err)
	}
	heard := c.CaptureAnnouncements(b)
	var up, down, told time.Duration
	for b.Loop() {
		heard.Forget()
		n.MustExec("ip", "addr", "add", anchor.String()+"/128", "dev", "br-ex", "nodad")
		t0 := time.Now()
		if err := l.Sync(t0); err != nil {
			b.Fatal(err)
		}
		up += time.Since(t0)
		// told: until the client on the segment had heard every added
		// address announced once (what moves a client that knows it).
		deadline := time.Now().Add(5 * time.Second)
		for heard.LastFirst(h.Instances[0].Sidecar).IsZero() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		last := heard.LastFirst(h.Instances[0].Sidecar)
		if last.IsZero() {
			b.Fatal("the client did not hear every added address announced within 5 s")
		}
		told += last.Sub(t0)
		n.MustExec("ip", "addr", "del", anchor.String()+"/128", "dev", "br-ex")
		t0 = time.Now()
		if err := l.Sync(t0.Add(time.Hour)); err != nil { // routes lapse too
			b.Fatal(err)
		}
		down += time.Since(t0)
	}
	fmt.Printf("follower case=burst mode=%s addresses=2500 held=2500 told_ms=%d up_ms=%d down_ms=%d\n", mode,
		told.Milliseconds()/int64(b.N), up.Milliseconds()/int64(b.N), down.Milliseconds()/int64(b.N))
}

// BenchmarkAnnounceRound: one round of announcements for 2500 addresses
// of a family (a refresh round of a node holding them, as sendGARPs and
// sendNAs send it), on a segment with three other hosts, whose kernels'
// share of the work the sender's CPU carries (veth and bridge deliver in
// the sender's context). It is what showed that neighbour
// advertisements sent as whole frames from a packet socket cost no less
// than through the ICMPv6 socket (docs/benchmarks.md).
//
//	go test -run '^$' -bench BenchmarkAnnounceRound -benchtime 20x ./pkg/dataplane/
func BenchmarkAnnounceRound(b *testing.B) {
	lab := netlab.New(b)
	n := lab.AddHost("n", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	for i := range 3 {
		lab.AddHost(fmt.Sprintf("c%d", i), netlab.HostOpts{Addrs: []string{fmt.Sprintf("198.51.100.%d/24", 21+i), fmt.Sprintf("2001:db8:100::%d/64", 21+i)}})
	}
	for _, family := range []string{"ipv4", "ipv6"} {
		// IPv4: the lab's /24 ten times over (the cost is per
		// message, and no address outside it may be announced).
		var addrs []netip.Addr
		for i, a6 := 0, netip.MustParseAddr("2001:db8:100::1:0"); i < 2500; i, a6 = i+1, a6.Next() {
			a := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})
			if family == "ipv6" {
				a = a6
			}
			addrs = append(addrs, a)
		}
		b.Run(family, func(b *testing.B) {
			if err := n.Do(func() error {
				link, err := netlink.LinkByName("br-ex")
				if err != nil {
					return err
				}
				for b.Loop() {
					if err := announce(link, addrs, 1); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(addrs)), "µs/address")
		})
	}
}
