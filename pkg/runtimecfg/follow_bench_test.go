package runtimecfg

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vipctl/internal/netlab"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
)

// BenchmarkFollowerBurst: one sync of a node whose anchor just appeared,
// with 2500 Service addresses to add, announce and give local routes, as
// after a failover; then one whose anchor just left.
//
//	go test -run '^$' -bench BenchmarkFollowerBurst -benchtime 5x ./pkg/runtimecfg/
func BenchmarkFollowerBurst(b *testing.B) {
	lab := netlab.New(b)
	n := lab.AddHost("n", netlab.HostOpts{Addrs: []string{"2001:db8:100::11/64"}})
	tn := Target{Root: b.TempDir(), Netns: n.NS}
	r6, _ := v1alpha1.ParseAddressRange("2001:db8:100::1:0/112")
	anchor := netip.MustParseAddr("2001:db8:100::1:ffff")
	var svc []netip.Addr
	for a, i := netip.MustParseAddr("2001:db8:100::1:0"), 0; i < 2500; a, i = a.Next(), i+1 {
		svc = append(svc, a)
	}
	l := NewLocalVIPs(tn, time.Millisecond)
	l.SetHandover(render.Handover{Interface: "br-ex", SidecarRanges: []v1alpha1.AddressRange{r6}, Instances: []render.HandoverInstance{
		{Family: 6, VRID: 1, Priority: 50, VIPs: append([]netip.Addr{anchor}, svc...), Peers: []netip.Addr{netip.MustParseAddr("2001:db8:100::12")},
			Anchors: []netip.Addr{anchor}, Sidecar: svc},
	}})
	var up, down time.Duration
	for b.Loop() {
		n.MustExec("ip", "addr", "add", anchor.String()+"/128", "dev", "br-ex", "nodad")
		t0 := time.Now()
		if err := l.Sync(t0); err != nil {
			b.Fatal(err)
		}
		up += time.Since(t0)
		n.MustExec("ip", "addr", "del", anchor.String()+"/128", "dev", "br-ex")
		t0 = time.Now()
		if err := l.Sync(t0.Add(time.Hour)); err != nil { // routes lapse too
			b.Fatal(err)
		}
		down += time.Since(t0)
	}
	fmt.Printf("follower case=burst addresses=%d up_ms=%d down_ms=%d\n", len(svc), up.Milliseconds()/int64(b.N), down.Milliseconds()/int64(b.N))
}
