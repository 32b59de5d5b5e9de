package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

var (
	peerScaleServices = flag.Int("peer-scale-services", 1000, "BenchmarkPeersScale: LoadBalancer Services loaded")
	peerScaleSample   = flag.Int("peer-scale-sample", 100, "BenchmarkPeersScale: loaded addresses the client asks "+
		"(the kernel's IPv6 neighbour table, shared by every namespace of the machine, holds 1024 entries)")
	peerScaleAdds   = flag.Int("peer-scale-adds", 20, "BenchmarkPeersScale: Services added one at a time after the load, each timed to its first answer")
	peerScaleSteady = flag.Duration("peer-scale-steady", 30*time.Second, "BenchmarkPeersScale: how long CPU is measured with the Services loaded")
)

// peerScalePool holds the peers' Service addresses at scale: IPv6, as
// thousands do not fit the IPv4 documentation ranges; on the client's
// link.
var peerScalePool = netip.MustParsePrefix("2001:db8:100::1:0/112")

// peerScaleAddr is the i-th address of peerScalePool (from ::1:1).
func peerScaleAddr(i int) netip.Addr {
	a := peerScalePool.Addr().As16()
	n := uint32(a[12])<<24 | uint32(a[13])<<16 | uint32(a[14])<<8 | uint32(a[15])
	n += uint32(i) + 1
	a[12], a[13], a[14], a[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(a)
}

// BenchmarkPeersScale loads -peer-scale-services LoadBalancer Services
// (IPv6, a ready endpoint on every node) into a peer's lab of
// BenchmarkPeers (three nodes, the peer as its docs configure it over
// ARP/NDP) and measures from the client:
//
//	peers-scale peer=P version=V settings=S services=N sampled=K bulk_ms=B add_p50_ms= add_p95_ms= add_max_ms= \
//	  loss_vips=L loss_median_ms= loss_max_ms= unrecovered=U node_cpu_pct= node_rss_mib= controller_cpu_pct= controller_rss_mib= agents_exited=E
//
// bulk: from the first Service created to every sampled address (K of
// them, evenly spread) answering; add: Services created one at a time
// after that, each to its first answer; loss: the node answering for the
// most sampled addresses loses its switch port, and each of its sampled
// addresses is asked every 50 ms until another node answers (from the
// fault; unrecovered after two minutes); node_cpu_pct and node_rss_mib:
// the busiest node's agent over -peer-scale-steady with the Services
// loaded, in % of one core and MiB; controller_*: MetalLB's controller
// (kube-vip has none); agents_exited: agents that died during the run
// (not restarted, where the kubelet would restart their pods). vipctl's own numbers at scale come from
// BenchmarkScale (docs/benchmarks.md).
//
// Run with `make bench-peers-scale`.
func BenchmarkPeersScale(b *testing.B) {
	kubeVIP, kubeVIPVersion := peerBinary(b, "kube-vip")
	controller, metallbVersion := peerBinary(b, "metallb-controller")
	speaker, _ := peerBinary(b, "metallb-speaker")
	b.Run("kube-vip", func(b *testing.B) {
		pl := startPeerLab(b, false)
		agents := pl.startKubeVIP(b, kubeVIP, "service")
		logOnFailure(b, "kube-vip", agents)
		peerScale(b, pl, "kube-vip", kubeVIPVersion, "svc_election/lease=5s/renew=3s/retry=1s", agents, true)
	})
	b.Run("metallb", func(b *testing.B) {
		pl := startPeerLab(b, false)
		agents := pl.startMetalLB(b, controller, speaker, false, peerScalePool.String())
		peerScale(b, pl, "metallb", metallbVersion, "l2/memberlist", agents, false)
	})
}

// peerScale runs BenchmarkPeersScale's measurements on a lab whose peer
// runs as agents (by node; MetalLB's controller under "controller").
// With annotate each Service names its address in kube-vip's annotation;
// else the peer's controller assigns it.
func peerScale(b *testing.B, pl *peerLab, peer, version, settings string, agents map[string]*netlab.Proc, annotate bool) {
	ctx := context.Background()
	n := *peerScaleServices
	create := func(i int) error {
		var ann map[string]string
		if annotate {
			ann = map[string]string{"kube-vip.io/loadbalancerIPs": peerScaleAddr(i).String()}
		}
		return pl.createEchoService(ctx, fmt.Sprintf("svc-%d", i), true, ann)
	}
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := create(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating the Services: %v", err)
	}
	b.Logf("%d Services created in %s", n, time.Since(start).Round(time.Millisecond))

	// The sampled Services' addresses: kube-vip's are the annotations,
	// MetalLB's come from its controller.
	var sampled []netip.Addr
	for k := range *peerScaleSample {
		i := k * n / *peerScaleSample
		a := peerScaleAddr(i)
		if !annotate {
			a = waitLBAddr(b, pl, fmt.Sprintf("svc-%d", i), 5*time.Minute)
		}
		sampled = append(sampled, a)
	}
	holders := answerAll(b, pl.client, sampled, start, 200*time.Millisecond, 10*time.Minute)
	var bulk time.Duration
	for _, h := range holders {
		bulk = max(bulk, h.after)
	}
	b.Logf("every sampled address answering %s after the first Service", bulk.Round(time.Millisecond))

	// Steady state: the agents' CPU over the window, their RSS after it.
	time.Sleep(10 * time.Second)
	cpu0 := map[string]float64{}
	for name, p := range agents {
		cpu0[name] = cpuSeconds(b, p.PID())
	}
	time.Sleep(*peerScaleSteady)
	nodeCPU, nodeRSS, ctlCPU, ctlRSS := 0.0, 0, 0.0, 0
	for name, p := range agents {
		pct := 100 * (cpuSeconds(b, p.PID()) - cpu0[name]) / peerScaleSteady.Seconds()
		rss := (procStatusKB(p.PID(), "VmRSS:") + 1023) / 1024
		if name == "controller" {
			ctlCPU, ctlRSS = pct, rss
			continue
		}
		nodeCPU, nodeRSS = max(nodeCPU, pct), max(nodeRSS, rss)
	}

	// Services added one at a time.
	var adds []time.Duration
	for j := range *peerScaleAdds {
		i := n + j
		t0 := time.Now()
		if err := create(i); err != nil {
			b.Fatal(err)
		}
		a := peerScaleAddr(i)
		if !annotate {
			a = waitLBAddr(b, pl, fmt.Sprintf("svc-%d", i), time.Minute)
		}
		got := answerAll(b, pl.client, []netip.Addr{a}, t0, 20*time.Millisecond, 2*time.Minute)
		adds = append(adds, got[a].after)
	}
	slices.Sort(adds)

	// The node answering for the most sampled addresses is lost.
	current := answerAll(b, pl.client, sampled, time.Now(), 200*time.Millisecond, time.Minute)
	count := map[string]int{}
	for _, h := range current {
		count[h.node]++
	}
	var victim string
	for node, c := range count {
		if victim == "" || c > count[victim] {
			victim = node
		}
	}
	var lost []netip.Addr
	for a, h := range current {
		if h.node == victim {
			lost = append(lost, a)
		}
	}
	fault := time.Now()
	pl.hosts[victim].LinkDown()
	moved := answerUntil(pl.client, lost, func(node string) bool { return node != victim }, fault, 50*time.Millisecond, 2*time.Minute)
	var outages []time.Duration
	for _, h := range moved {
		outages = append(outages, h.after)
	}
	slices.Sort(outages)
	unrecovered := len(lost) - len(outages)
	lossMedian, lossMax := time.Duration(0), time.Duration(0)
	if len(outages) > 0 {
		lossMedian, lossMax = percentile(outages, 50), outages[len(outages)-1]
	}
	// An agent that died (kube-vip v0.9.2 can, on a burst of Services)
	// is not restarted here as the kubelet would restart its pod: the
	// line says so, and its log tail is kept.
	exited := 0
	for name, p := range agents {
		if p.Exited() {
			exited++
			b.Logf("%s's agent exited; its log ends:\n%s", name, p.LogTail(15))
		}
	}
	fmt.Fprintf(os.Stdout, "peers-scale peer=%s version=%s settings=%s services=%d sampled=%d bulk_ms=%d add_p50_ms=%d add_p95_ms=%d add_max_ms=%d "+
		"loss_vips=%d loss_median_ms=%d loss_max_ms=%d unrecovered=%d node_cpu_pct=%.1f node_rss_mib=%d controller_cpu_pct=%.1f controller_rss_mib=%d agents_exited=%d\n",
		peer, version, settings, n, len(sampled), bulk.Milliseconds(), percentile(adds, 50).Milliseconds(), percentile(adds, 95).Milliseconds(), adds[len(adds)-1].Milliseconds(),
		len(lost), lossMedian.Milliseconds(), lossMax.Milliseconds(), unrecovered, nodeCPU, nodeRSS, ctlCPU, ctlRSS, exited)
}

// waitLBAddr waits for the address a Service's status gives it.
func waitLBAddr(t testing.TB, pl *peerLab, name string, timeout time.Duration) netip.Addr {
	t.Helper()
	var a netip.Addr
	lab.WaitFor(t, timeout, name+"'s address", func() bool {
		s, err := pl.admin.CoreV1().Services(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false
		}
		a, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err == nil
	})
	return a
}

// answer is when an address first answered, and which node answered.
type answer struct {
	node  string
	after time.Duration
}

// answerAll is answerUntil with any node's answer, failing t unless
// every address answered within timeout.
func answerAll(t testing.TB, client *netlab.Host, addrs []netip.Addr, since time.Time, every, timeout time.Duration) map[netip.Addr]answer {
	t.Helper()
	got := answerUntil(client, addrs, func(string) bool { return true }, since, every, timeout)
	if len(got) != len(addrs) {
		var missing []string
		for _, a := range addrs {
			if _, ok := got[a]; !ok {
				missing = append(missing, a.String())
			}
		}
		t.Fatalf("%d of %d addresses did not answer within %s: %s", len(missing), len(addrs), timeout, strings.Join(missing, " "))
	}
	return got
}

// answerUntil asks every address http://[a]:8080/ from client, every
// interval (250 ms timeout), until a node for which ok holds answers it,
// for up to timeout, and returns those first answers, timed from since.
func answerUntil(client *netlab.Host, addrs []netip.Addr, ok func(node string) bool, since time.Time, every, timeout time.Duration) map[netip.Addr]answer {
	c := &http.Client{
		Timeout: lab.PollTimeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return client.DialContext(ctx, network, addr)
			},
		},
	}
	var mu sync.Mutex
	got := map[netip.Addr]answer{}
	deadline := time.Now().Add(timeout)
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() {
			url := "http://" + netip.AddrPortFrom(a, 8080).String() + "/"
			for time.Now().Before(deadline) {
				asked := time.Now()
				resp, err := c.Get(url)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if node := strings.TrimSpace(string(body)); ok(node) {
						mu.Lock()
						got[a] = answer{node: node, after: time.Since(since)}
						mu.Unlock()
						return
					}
				}
				time.Sleep(time.Until(asked.Add(every)))
			}
		})
	}
	wg.Wait()
	return got
}
