package e2e

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

var (
	peerScaleServices = flag.Int("peer-scale-services", 1000, "BenchmarkPeersScale: LoadBalancer Services loaded")
	peerScaleSample   = flag.Int("peer-scale-sample", 100, "BenchmarkPeersScale: loaded addresses the client asks "+
		"(the kernel's IPv6 neighbour table, shared by every namespace of the machine, holds 1024 entries)")
	peerScaleAdds   = flag.Int("peer-scale-adds", 20, "BenchmarkPeersScale: Services added one at a time after the load, each timed to its first answer")
	peerScaleAddGap = flag.Duration("peer-scale-add-gap", time.Second, "BenchmarkPeersScale: the pause between one added Service answering and the next created (0: back to back)")
	peerScaleSteady = flag.Duration("peer-scale-steady", 30*time.Second, "BenchmarkPeersScale: how long CPU is measured with the Services loaded")
	peerScaleSettle = flag.Duration("peer-scale-settle", 10*time.Second, "BenchmarkPeersScale: the pause between every sampled address answering and the CPU window "+
		"(vipctl's sidecar refreshes an address every minute for five minutes after it came, every ten after that: 6m measures past that)")
	peerScaleProfile = flag.String("peer-scale-profile", "", "BenchmarkPeersScale: a directory for CPU profiles of vipctl's sidecars over the CPU window, one per node (NODE.pprof)")
	peerScaleTrace   = flag.String("peer-scale-trace", "", "BenchmarkPeersScale: a directory for what explains the node loss: "+
		"trace.txt (per lost address its outage, the announcements the client heard, its neighbour entry's changes and the handshakes "+
		"each host saw after the fault; every host's kernel counters) and every agent's log (AGENT-I.log)")
	peerScalePolled = flag.Int("peer-scale-polled", 10, "BenchmarkPeersScale: loaded addresses asked every 100 ms while Services are added")
	peerScalePeers  = flag.String("peer-scale-peers", "vipctl,kube-vip,metallb", "BenchmarkPeersScale: the peers to run, in order "+
		"(vipctl-default: vipctl with its default profile; vipctl-pools: the pool alone, spec.mode poolsOnly, without the API VIP; vipctl-pools-default: both; "+
		"kube-vip: an election per Service; kube-vip-global: one election for all Services, kube-vip's default)")
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
// ARP/NDP; vipctl with the pool's announce: sidecar, the one its docs
// give for thousands of Services) and measures from the client:
//
//	peers-scale peer=P version=V settings=S services=N sampled=K bulk_ms=B add_p50_ms= add_p95_ms= add_max_ms= add_assigned_p50_ms= add_assigned_p95_ms= \
//	  add_answered_p50_ms= add_answered_p95_ms= untouched_requests= untouched_failed= loss_vips=L loss_median_ms= loss_max_ms= unrecovered=U \
//	  node_cpu_pct= node_rss_mib= controller_cpu_pct= controller_rss_mib= agents_exited=E
//
// bulk: from the first Service created to every sampled address (K of
// them, evenly spread) answering; add: Services created one at a time
// after that, -peer-scale-add-gap apart, each to its first answer
// (assigned: to its address in its status, as a watch on it hears;
// answered: from there to the first answer; n/a where the Service names
// its address); untouched: requests to -peer-scale-polled
// of the sampled addresses, every 100 ms each, while those Services are
// added, and how many failed; loss: the node answering for the most
// sampled addresses loses its switch port, and each of its sampled
// addresses is asked every 50 ms (answerUntil: a new request each time,
// not waiting for the last) until another node
// answers (from the fault; unrecovered after two minutes); node_cpu_pct
// and node_rss_mib: the busiest node's agents over -peer-scale-steady,
// from -peer-scale-settle after every sampled address answered, in % of one core and MiB (every process the
// peer runs on a node, with its children: vipctl's keepalived and its
// sidecar); controller_*: the peer's controller (MetalLB's, vipctl's
// allocator; kube-vip has none); agents_exited: agents that died during
// the run (not restarted, where the kubelet would restart their pods).
//
// Run with `make bench-peers-scale`.
func BenchmarkPeersScale(b *testing.B) {
	kubeVIP, kubeVIPVersion := peerBinary(b, "kube-vip")
	controller, metallbVersion := peerBinary(b, "metallb-controller")
	speaker, _ := peerBinary(b, "metallb-speaker")
	for _, peer := range strings.Split(*peerScalePeers, ",") {
		switch peer {
		case "vipctl", "vipctl-default", "vipctl-pools", "vipctl-pools-default":
			// vipctl's fast profile, or its default one (an advert a
			// second instead of ten: less CPU, a slower failover); with
			// the API VIP, or the pool alone as the peers run.
			profile, settings := "fast", "/announce=sidecar"
			if strings.HasSuffix(peer, "-default") {
				profile = "default"
			}
			poolsOnly := strings.HasPrefix(peer, "vipctl-pools")
			if poolsOnly {
				settings = "/mode=poolsOnly" + settings
			}
			b.Run(peer, func(b *testing.B) {
				pl, agents := startVipctlPeer(b, profile, poolsOnly)
				peerScale(b, pl, "vipctl", vipctlVersion(), "profile="+profile+settings, agents, false)
			})
		case "kube-vip", "kube-vip-global":
			// An election per Service (svc_election), or one for all
			// Services, kube-vip's default.
			kind, settings := "service", kubeVIPLeases[0].serviceSettings()
			if peer == "kube-vip-global" {
				kind, settings = "service-global", "global_election/"+kubeVIPLeases[0].settings()
			}
			b.Run(peer, func(b *testing.B) {
				pl := startPeerLab(b, false, false)
				agents := pl.startKubeVIP(b, kubeVIP, kind, kubeVIPLeases[0])
				logOnFailure(b, "kube-vip", agents)
				peerScale(b, pl, "kube-vip", kubeVIPVersion, settings, oneAgentEach(agents), true)
			})
		case "metallb":
			b.Run("metallb", func(b *testing.B) {
				pl := startPeerLab(b, false, false)
				agents := pl.startMetalLB(b, controller, speaker, metallbL2, peerScalePool.String())
				peerScale(b, pl, "metallb", metallbVersion, "l2/memberlist", oneAgentEach(agents), false)
			})
		default:
			b.Fatalf("-peer-scale-peers: unknown peer %q (vipctl, vipctl-default, vipctl-pools, vipctl-pools-default, kube-vip, kube-vip-global, metallb)", peer)
		}
	}
}

// scaleAgent is a process a peer runs (netlab.Proc, benchProc).
type scaleAgent interface {
	PID() int
	Exited() bool
	LogTail(n int) string
}

func oneAgentEach(procs map[string]*netlab.Proc) map[string][]scaleAgent {
	out := map[string][]scaleAgent{}
	for name, p := range procs {
		out[name] = []scaleAgent{p}
	}
	return out
}

// processTree is pid and every process below it (keepalived's VRRP and
// checker children).
func processTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, childPIDs(out[i])...)
	}
	return out
}

// agentUsage is the CPU seconds and resident KiB of an agent's process
// with its children, as /proc has them now.
func agentUsage(b *testing.B, a scaleAgent) (cpu float64, rssKB int) {
	for _, pid := range processTree(a.PID()) {
		cpu += cpuSeconds(b, pid)
		rssKB += procStatusKB(pid, "VmRSS:")
	}
	return cpu, rssKB
}

// peerScale runs BenchmarkPeersScale's measurements on a lab whose peer
// runs as agents (by node; its controller under "controller").
// With annotate each Service names its address in kube-vip's annotation;
// else the peer's controller assigns it.
func peerScale(b *testing.B, pl *peerLab, peer, version, settings string, agents map[string][]scaleAgent, annotate bool) {
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
	// MetalLB's and vipctl's come from their controllers.
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
	time.Sleep(*peerScaleSettle)
	pl.toggleProfiles(b)
	// The CPU seconds of each agent (with its children) at the start.
	cpu0 := map[string][]float64{}
	for name, procs := range agents {
		for _, p := range procs {
			c, _ := agentUsage(b, p)
			cpu0[name] = append(cpu0[name], c)
		}
	}
	time.Sleep(*peerScaleSteady)
	pl.toggleProfiles(b)
	nodeCPU, nodeRSS, ctlCPU, ctlRSS := 0.0, 0, 0.0, 0
	for name, procs := range agents {
		// Each agent's share, logged in the agents' order (on vipctl's
		// nodes keepalived, then the sidecar).
		var pct float64
		kb := 0
		var each []string
		for i, p := range procs {
			c, k := agentUsage(b, p)
			share := 100 * (c - cpu0[name][i]) / peerScaleSteady.Seconds()
			pct, kb = pct+share, kb+k
			each = append(each, fmt.Sprintf("pid %d %.2f %%, %d MiB", p.PID(), share, (k+1023)/1024))
		}
		b.Logf("%s: %.2f %% of a core over %s (%s)", name, pct, *peerScaleSteady, strings.Join(each, "; "))
		rss := (kb + 1023) / 1024
		if name == "controller" {
			ctlCPU, ctlRSS = pct, rss
			continue
		}
		nodeCPU, nodeRSS = max(nodeCPU, pct), max(nodeRSS, rss)
	}

	// Services added one at a time, while the client asks some loaded
	// addresses, each every 100 ms.
	var pollers []*lab.Poller
	for _, a := range sampled[:min(*peerScalePolled, len(sampled))] {
		pollers = append(pollers, lab.StartPolling(pl.client, "http://"+netip.AddrPortFrom(a, 8080).String()+"/", 100*time.Millisecond, lab.PollTimeout, true))
	}
	var adds, assigns, afterAssign []time.Duration
	for j := range *peerScaleAdds {
		i := n + j
		time.Sleep(*peerScaleAddGap)
		name := fmt.Sprintf("svc-%d", i)
		var assigned <-chan netip.Addr
		if !annotate {
			assigned = watchLBAddr(b, pl, name)
		}
		t0 := time.Now()
		if err := create(i); err != nil {
			b.Fatal(err)
		}
		a := peerScaleAddr(i)
		if !annotate {
			select {
			case a = <-assigned:
				assigns = append(assigns, time.Since(t0))
			case <-time.After(time.Minute):
				b.Fatalf("%s got no address within a minute", name)
			}
		}
		got := answerAll(b, pl.client, []netip.Addr{a}, t0, 20*time.Millisecond, 2*time.Minute)
		adds = append(adds, got[a].after)
		if !annotate {
			afterAssign = append(afterAssign, got[a].after-assigns[len(assigns)-1])
		}
	}
	slices.Sort(adds)
	// kube-vip: the Service names its own address.
	assign, assign95, after, after95 := "n/a", "n/a", "n/a", "n/a"
	if len(assigns) > 0 {
		slices.Sort(assigns)
		slices.Sort(afterAssign)
		ms := func(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
		assign, assign95 = ms(failoverbench.Percentile(assigns, 50)), ms(failoverbench.Percentile(assigns, 95))
		after, after95 = ms(failoverbench.Percentile(afterAssign, 50)), ms(failoverbench.Percentile(afterAssign, 95))
	}
	untouched, untouchedFailed := 0, 0
	for i, p := range pollers {
		ok, failed := p.Stop()
		untouched, untouchedFailed = untouched+ok+failed, untouchedFailed+failed
		if failed > 0 {
			b.Logf("%s failed %d of %d requests while Services were added: %v", sampled[i], failed, ok+failed, p.Errors())
		}
	}

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
	var trace *lossTrace
	if *peerScaleTrace != "" {
		trace = startLossTrace(b, pl, lost)
	}
	fault := time.Now()
	trace.fault(fault)
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
		lossMedian, lossMax = failoverbench.Percentile(outages, 50), outages[len(outages)-1]
	}
	if trace != nil {
		// The new holders' syncs and repeats finish after the first answers.
		time.Sleep(5 * time.Second)
		trace.write(b, agents, victim, moved)
	}
	// An agent that died (kube-vip v0.9.2 can, on a burst of Services)
	// is not restarted here as the kubelet would restart its pod: the
	// line says so, and its log tail is kept.
	exited := 0
	for name, procs := range agents {
		for _, p := range procs {
			if p.Exited() {
				exited++
				b.Logf("an agent of %s exited; its log ends:\n%s", name, p.LogTail(15))
			}
		}
	}
	fmt.Fprintf(os.Stdout, "peers-scale peer=%s version=%s settings=%s services=%d sampled=%d bulk_ms=%d add_p50_ms=%d add_p95_ms=%d add_max_ms=%d add_assigned_p50_ms=%s add_assigned_p95_ms=%s add_answered_p50_ms=%s add_answered_p95_ms=%s "+
		"untouched_requests=%d untouched_failed=%d loss_vips=%d loss_median_ms=%d loss_max_ms=%d unrecovered=%d "+
		"node_cpu_pct=%.1f node_rss_mib=%d controller_cpu_pct=%.1f controller_rss_mib=%d agents_exited=%d\n",
		peer, version, settings, n, len(sampled), bulk.Milliseconds(), failoverbench.Percentile(adds, 50).Milliseconds(), failoverbench.Percentile(adds, 95).Milliseconds(), adds[len(adds)-1].Milliseconds(), assign, assign95, after, after95,
		untouched, untouchedFailed, len(lost), lossMedian.Milliseconds(), lossMax.Milliseconds(), unrecovered, nodeCPU, nodeRSS, ctlCPU, ctlRSS, exited)
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

// watchLBAddr watches the Service name, which may not exist yet, and
// sends the first address its status gives it, as soon as the API has
// it: so that a Service's own time to answer is not stretched by polling
// for its address.
func watchLBAddr(t testing.TB, pl *peerLab, name string) <-chan netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w, err := pl.admin.CoreV1().Services(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan netip.Addr, 1)
	go func() {
		defer cancel()
		defer w.Stop()
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Service); ok && len(s.Status.LoadBalancer.Ingress) > 0 {
				if a, err := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP); err == nil {
					out <- a
					return
				}
			}
		}
	}()
	return out
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

// answerUntil asks every address http://[a]:8080/ from client, a new
// request every interval without waiting for the earlier ones (250 ms
// timeout each, as the failover benchmarks' client), until a node for
// which ok holds answers it, for up to timeout, and returns those first
// answers, timed from since to the answer's arrival. Not one request at
// a time: a request to a lost holder would hold the next back for its
// whole timeout, and the answers would land on a 250 ms grid.
func answerUntil(client *netlab.Host, addrs []netip.Addr, ok func(node string) bool, since time.Time, every, timeout time.Duration) map[netip.Addr]answer {
	c := &http.Client{Timeout: lab.PollTimeout, Transport: probe.Transport(client.DialContext, lab.PollTimeout)}
	var mu sync.Mutex
	got := map[netip.Addr]answer{}
	deadline := time.Now().Add(timeout)
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() {
			url := "http://" + netip.AddrPortFrom(a, 8080).String() + "/"
			answered := make(chan struct{})
			var once sync.Once
			var requests sync.WaitGroup
			defer requests.Wait()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				requests.Go(func() {
					resp, err := c.Get(url)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if node := strings.TrimSpace(string(body)); ok(node) {
						once.Do(func() {
							mu.Lock()
							got[a] = answer{node: node, after: time.Since(since)}
							mu.Unlock()
							close(answered)
						})
					}
				})
				select {
				case <-answered:
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	return got
}

// toggleProfiles starts or ends the CPU profiles of the agents run with
// --cpu-profile.
func (pl *peerLab) toggleProfiles(b *testing.B) {
	for _, p := range pl.profiled {
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			b.Fatalf("profiling pid %d: %v", p.PID(), err)
		}
	}
}

// startVipctlPeer runs vipctl in a lab of three nodes as its pods would,
// each part a process of its own, next to the peers' labs: keepalived
// and the sidecar (`vipctl runtimecfg`, with the node's client
// certificate) on every node, the allocator (`vipctl allocator`, with its
// ServiceAccount's token) beside them; one pool on peerScalePool with
// announce: sidecar; on every node an echo answering with the node's
// name, as in the peers' labs. poolsOnly: the pool alone (spec.mode
// poolsOnly), no API VIP, its haproxy and its check, as MetalLB and
// kube-vip's Services run; else the API VIP too. It returns the lab as
// peerScale reads it, and the agents by node, the allocator under
// "controller".
func startVipctlPeer(b *testing.B, profile string, poolsOnly bool) (*peerLab, map[string][]scaleAgent) {
	bin, err := buildVipctl()
	if err != nil {
		b.Fatal(err)
	}
	specs := masters(3)
	for i := range specs {
		specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
	}
	pools := fmt.Sprintf("  servicePools:\n    - name: scale\n      addresses: [%q]\n      announce: sidecar\n", peerScalePool)
	cfg := clusterYAML(profile, "unicast", pools)
	if poolsOnly {
		cfg = poolsOnlyYAML(profile, "unicast", pools)
	}
	kc := lab.StartKube(b, cfg, specs)
	kc.ApplyManifests(b)
	dir := b.TempDir()
	allocatorKubeconfig := filepath.Join(dir, "allocator.kubeconfig")
	testapiserver.WriteKubeconfig(b, kc.API.TokenConfig(lab.AllocatorToken(b, kc.Admin)), allocatorKubeconfig)
	agents := map[string][]scaleAgent{
		"controller": {startProcess(b, bin, "allocator", "--kubeconfig", allocatorKubeconfig, "--id", "allocator-0", "--listen", "")},
	}
	adminCfg := kc.API.AdminConfig()
	adminCfg.QPS, adminCfg.Burst = 1000, 2000
	pl := &peerLab{api: kc.API, client: kc.Client, hosts: map[string]*netlab.Host{}, admin: kubernetes.NewForConfigOrDie(adminCfg)}
	probe := lab.BuildProbe(b)
	for _, n := range kc.Nodes {
		kc.AddNode(b, n.Name)
		lab.StartEchoProcess(b, probe, n.Host, "[::]:8080", n.Name)
		nodeKubeconfig := filepath.Join(dir, n.Name+".kubeconfig")
		testapiserver.WriteKubeconfig(b, kc.API.NodeConfig(b, n.Name), nodeKubeconfig)
		n.StopLocal() // the sidecar keeps the VIPs local from now on
		args := []string{"runtimecfg", "--config", kc.ConfigPath, "--bootstrap-nodes", n.Target.Path(onnode.BootstrapNodesPath),
			"--node-name", n.Name, "--kubeconfig", nodeKubeconfig, "--listen", "", "--metrics-listen", "", "--root", n.Target.Root, "--netns", n.Host.NS}
		if *peerScaleProfile != "" {
			// The sidecar only logs a profile it cannot create.
			if err := os.MkdirAll(*peerScaleProfile, 0o755); err != nil {
				b.Fatal(err)
			}
			args = append(args, "--cpu-profile", filepath.Join(*peerScaleProfile, n.Name+".pprof"))
		}
		sidecar := startProcess(b, bin, args...)
		if *peerScaleProfile != "" {
			pl.profiled = append(pl.profiled, sidecar)
		}
		agents[n.Name] = []scaleAgent{n.Keepalived, sidecar}
		pl.names = append(pl.names, n.Name)
		pl.hosts[n.Name] = n.Host
	}
	return pl, agents
}

// lossTrace is what -peer-scale-trace records around the node loss:
// the announcements the client hears, the client's neighbour entries of
// the lost addresses, every host's handshakes on the echo port and
// kernel counters.
type lossTrace struct {
	pl        *peerLab
	lost      []netip.Addr
	at        time.Time
	heard     *netlab.Announcements
	segments  map[string]*netlab.Segments
	counters0 map[string]map[string]int64
	neigh     *neighTrace
}

// startLossTrace starts recording before the fault.
func startLossTrace(b *testing.B, pl *peerLab, lost []netip.Addr) *lossTrace {
	lt := &lossTrace{pl: pl, lost: slices.Clone(lost), heard: pl.client.CaptureAnnouncements(b),
		segments: map[string]*netlab.Segments{"client": pl.client.CaptureSegments(b, 8080)}}
	for name, h := range pl.hosts {
		lt.segments[name] = h.CaptureSegments(b, 8080)
	}
	lt.counters0 = pl.counters()
	return lt
}

// fault marks the fault's moment (nothing without a trace).
func (lt *lossTrace) fault(at time.Time) {
	if lt == nil {
		return
	}
	lt.at = at
	lt.heard.Forget()
	lt.neigh = traceNeighbours(lt.pl.client, lt.lost, at)
}

// write writes the directory's files: trace.txt, for each lost address
// by outage, the node that answered after the fault, every announcement
// of it the client heard, the client's neighbour entry's changes and the
// handshakes each host saw (by node, ms after the fault), then each
// host's counters that changed; and every agent's log.
func (lt *lossTrace) write(b *testing.B, agents map[string][]scaleAgent, victim string, moved map[netip.Addr]answer) {
	pl, fault, lost, heard, segments := lt.pl, lt.at, lt.lost, lt.heard, lt.segments
	neigh := lt.neigh.stop()
	dir := *peerScaleTrace
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	byMAC := map[string]string{}
	for name, h := range pl.hosts {
		byMAC[h.MAC()] = name
	}
	// nodeOf names a node by its MAC address (the address itself for
	// another host, the client's or the gateway's).
	nodeOf := func(mac string) string { return cmp.Or(byMAC[mac], mac) }
	// By outage, the unrecovered last.
	outage := func(a netip.Addr) time.Duration {
		if m, ok := moved[a]; ok {
			return m.after
		}
		return time.Duration(math.MaxInt64)
	}
	slices.SortFunc(lost, func(x, y netip.Addr) int { return cmp.Compare(outage(x), outage(y)) })
	hosts := append([]string{"client"}, pl.names...)
	seen := map[string][]netlab.Segment{}
	for _, name := range hosts {
		seen[name] = segments[name].Since(fault)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "fault %s: %s's port dropped\n", fault.UTC().Format("15:04:05.000000"), victim)
	for _, a := range lost {
		if m, ok := moved[a]; !ok {
			fmt.Fprintf(&out, "%s unrecovered", a)
		} else {
			fmt.Fprintf(&out, "%s outage %d ms by %s", a, m.after.Milliseconds(), m.node)
		}
		fmt.Fprint(&out, " heard")
		for _, h := range heard.Heard(a) {
			fmt.Fprintf(&out, " %s@%d", nodeOf(h.MAC), h.At.Sub(fault).Milliseconds())
		}
		fmt.Fprint(&out, " neighbour")
		for _, c := range neigh[a] {
			fmt.Fprintf(&out, " %s/%s@%d", nodeOf(c.mac), c.state, c.at)
		}
		// The handshakes: the client's SYNs by the node they were sent
		// to, and its SYN-ACKs; each node's SYNs in and SYN-ACKs out.
		for _, name := range hosts {
			syns, synacks := map[string][]int64{}, map[string][]int64{}
			for _, seg := range seen[name] {
				switch {
				case seg.SYN && !seg.ACK && seg.Dst.Addr() == a:
					to := nodeOf(seg.DstMAC)
					syns[to] = append(syns[to], seg.At.Sub(fault).Milliseconds())
				case seg.SYN && seg.ACK && seg.Src.Addr() == a:
					from := nodeOf(seg.SrcMAC)
					synacks[from] = append(synacks[from], seg.At.Sub(fault).Milliseconds())
				}
			}
			for _, to := range slices.Sorted(maps.Keys(syns)) {
				fmt.Fprintf(&out, " %s:syn→%s%s", name, to, spanMs(syns[to]))
			}
			for _, from := range slices.Sorted(maps.Keys(synacks)) {
				fmt.Fprintf(&out, " %s:synack←%s%s", name, from, spanMs(synacks[from]))
			}
		}
		fmt.Fprintln(&out)
	}
	// What each node's and the client's kernel counted meanwhile.
	counters := pl.counters()
	for _, name := range slices.Sorted(maps.Keys(counters)) {
		fmt.Fprintf(&out, "%s counters since the fault:", name)
		for _, k := range slices.Sorted(maps.Keys(counters[name])) {
			if d := counters[name][k] - lt.counters0[name][k]; d != 0 {
				fmt.Fprintf(&out, " %s=%d", k, d)
			}
		}
		fmt.Fprintln(&out)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.txt"), []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for name, procs := range agents {
		for i, p := range procs {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i)), []byte(p.LogTail(5000)+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("the node loss's trace is in %s", dir)
}

// neighTrace follows the client's neighbour entries of some addresses:
// every change of link-layer address or state, with when after since.
type neighTrace struct {
	done    chan struct{}
	stopped chan map[netip.Addr][]neighChange
}

// neighChange is a neighbour entry as it became: its link-layer address
// (none while unresolved) and state, ms after the fault.
type neighChange struct {
	mac, state string
	at         int64
}

func traceNeighbours(client *netlab.Host, addrs []netip.Addr, since time.Time) *neighTrace {
	nt := &neighTrace{done: make(chan struct{}), stopped: make(chan map[netip.Addr][]neighChange, 1)}
	watched := map[netip.Addr]bool{}
	for _, a := range addrs {
		watched[a] = true
	}
	go func() {
		changes := map[netip.Addr][]neighChange{}
		last := map[netip.Addr]neighChange{}
		for {
			out, _ := client.Exec("ip", "-6", "neigh", "show")
			at := time.Since(since).Milliseconds()
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				a, err := netip.ParseAddr(f[0])
				if err != nil || !watched[a] {
					continue
				}
				// "ADDR dev IF [lladdr MAC] [router] STATE"
				state := f[len(f)-1]
				mac := ""
				if i := slices.Index(f, "lladdr"); i >= 0 && i+1 < len(f) {
					mac = f[i+1]
				}
				if l, seen := last[a]; !seen || l.mac != mac || l.state != state {
					last[a] = neighChange{mac, state, at}
					changes[a] = append(changes[a], last[a])
				}
			}
			select {
			case <-nt.done:
				nt.stopped <- changes
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return nt
}

func (nt *neighTrace) stop() map[netip.Addr][]neighChange {
	close(nt.done)
	return <-nt.stopped
}

// counters are the kernel's network counters of the client and every
// node, by host (none for a host whose counters cannot be read).
func (pl *peerLab) counters() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for name, h := range pl.hosts {
		out[name], _ = h.Counters()
	}
	out["client"], _ = pl.client.Counters()
	return out
}

// spanMs is "@first-last×n" of times in ms.
func spanMs(ms []int64) string {
	return fmt.Sprintf("@%d-%d×%d", ms[0], ms[len(ms)-1], len(ms))
}
