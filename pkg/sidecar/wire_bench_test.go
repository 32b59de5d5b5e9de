package sidecar

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/netlab"
)

// wireBenchVIPs is issue 54's load: a node asking for 5000 addresses.
const wireBenchVIPs = 5000

// BenchmarkWirePass: one node's pass over 5000 VIPs (IPv6, all held by
// one peer on the segment, as BenchmarkScale's Service addresses are) at
// the default --wire-rate, and what a third host on the segment, which
// holds none of them, receives meanwhile: the load the questions put on
// every host of the segment.
//
//	go test -run '^$' -bench BenchmarkWirePass -benchtime 1x ./pkg/sidecar/
func BenchmarkWirePass(b *testing.B) {
	lab := netlab.New(b)
	asker := lab.AddHost("asker", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"2001:db8:100::11/64"}})
	holder := lab.AddHost("holder", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"2001:db8:100::12/64"}})
	bystander := lab.AddHost("bystander", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"2001:db8:100::99/64"}})
	var vips []netip.Addr
	var batch strings.Builder
	for a, i := netip.MustParseAddr("2001:db8:100::1:0"), 0; i < wireBenchVIPs; a, i = a.Next(), i+1 {
		vips = append(vips, a)
		fmt.Fprintf(&batch, "addr add %s/128 dev br-ex nodad\n", a)
	}
	file := filepath.Join(b.TempDir(), "addrs")
	if err := os.WriteFile(file, []byte(batch.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	holder.MustExec("ip", "-batch", file)

	s := &Sidecar{
		o: Options{OnceOptions: runtimecfg.OnceOptions{Target: host.Target{Netns: asker.NS}, NodeName: "asker"},
			WireRate: DefaultWireRate, Addresses: func() ([]netip.Addr, error) { return nil, nil }},
		m: NewMetrics(nil), log: slog.New(slog.NewTextHandler(io.Discard, nil)), strangerEvents: newEventGate[string](foreignEventEvery, foreignSeriesMax),
	}
	s.mu.Lock()
	peer := []netip.Addr{netip.MustParseAddr("2001:db8:100::12")}
	s.wire = wireTargets{iface: "br-ex", addrs: vips, peers: peer, peersOf: map[netip.Addr][]netip.Addr{}}
	for _, a := range vips {
		s.wire.peersOf[a] = peer
	}
	s.mu.Unlock()
	s.m.Wire.Answerers.keep(vips)
	rx := func(h *netlab.Host) int64 {
		out := h.MustExec("cat", "/sys/class/net/br-ex/statistics/rx_packets")
		n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	for b.Loop() {
		q0, heard0, seen0 := testutil.ToFloat64(s.m.Wire.Questions), rx(holder), rx(bystander)
		cpu0 := cpuTime(b)
		start := time.Now()
		s.mu.Lock()
		tg := s.wire
		s.mu.Unlock()
		if _, _, err := s.askWire(context.Background(), tg); err != nil {
			b.Fatal(err)
		}
		pass := time.Since(start)
		cpu := cpuTime(b) - cpu0
		questions := testutil.ToFloat64(s.m.Wire.Questions) - q0
		once := 0
		for _, a := range vips {
			if n, _ := s.m.Wire.Answerers.Get(a); n == 1 {
				once++
			}
		}
		if once != len(vips) {
			b.Errorf("%d of %d VIPs answered once", once, len(vips))
		}
		fmt.Printf("wire vips=%d rate=%d pass_s=%.1f questions=%.0f questions_per_s=%.1f holder_rx_pps=%.1f bystander_rx_pps=%.1f answered_once=%d cpu_percent=%.2f\n",
			len(vips), s.o.WireRate, pass.Seconds(), questions, questions/pass.Seconds(),
			float64(rx(holder)-heard0)/pass.Seconds(), float64(rx(bystander)-seen0)/pass.Seconds(), once, 100*cpu.Seconds()/pass.Seconds())
	}
}

// cpuTime is the CPU time the benchmark's process has used: the pass
// runs in it (the lab's hosts are namespaces, their kernels' work is not
// counted).
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
