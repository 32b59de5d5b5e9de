package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

var (
	benchIdle  = flag.Duration("bench-idle", 30*time.Second, "BenchmarkRuntimecfg: how long the sidecar's idle CPU is measured before the churn")
	benchChurn = flag.Duration("bench-churn", 3*time.Minute, "BenchmarkRuntimecfg: how long Node statuses and EndpointSlices churn after the probes (0 skips the phase)")
	// The kubelet posts its Node status when something changed or, with
	// Leases on (the default), every nodeStatusReportFrequency (5m); its
	// 10 s heartbeat goes to a Lease, which the sidecar does not watch.
	// One status post per node per minute is five times that floor, to
	// stand in for posts with real changes (images, volumes, conditions).
	benchNodeStatusPeriod = flag.Duration("bench-node-status-period", time.Minute, "BenchmarkRuntimecfg churn: every Node posts its status once per period")
	benchSliceRate        = flag.Float64("bench-slice-updates", 5, "BenchmarkRuntimecfg churn: EndpointSlice updates per second, cluster-wide (pods turning ready or unready, moving)")
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// freeLocalPort is a TCP port on 127.0.0.1 nothing listens on now.
func freeLocalPort(b testing.TB) int {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// cpuSeconds is the CPU time of a process and of its children it waited
// for (the sidecar's keepalived -t and haproxy -c runs), from
// /proc/PID/stat.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name may hold spaces: fields count from its closing
	// parenthesis, where field 3 (state) starts.
	rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var ticks float64
	for _, f := range rest[11:15] { // utime, stime, cutime, cstime (fields 14-17)
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += v
	}
	return ticks / clockTicks
}

// promText is a scrape of a Prometheus text endpoint.
type promText string

// sum adds the samples of metric whose labels include every one of
// labels (each `key="value"`).
func (p promText) sum(metric string, labels ...string) float64 {
	var total float64
	for _, l := range strings.Split(string(p), "\n") {
		if !strings.HasPrefix(l, metric) || len(l) == len(metric) || (l[len(metric)] != '{' && l[len(metric)] != ' ') {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		series := l[:i]
		match := true
		for _, want := range labels {
			match = match && strings.Contains(series, want)
		}
		if !match {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

func scrapeAPIServer(b *testing.B, c kubernetes.Interface) promText {
	b.Helper()
	data, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return promText(data)
}

func scrapeURL(b *testing.B, url string) promText {
	b.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the bench's own sidecar on localhost
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return promText(data)
}

// sidecarResources are what the sidecar watches in the bench cluster (no
// IngressController, so no router pods).
var sidecarResources = []string{"nodes", "services", "endpointslices", "configmaps"}

// apiWatches counts the watches the apiserver serves, per resource.
func apiWatches(p promText) map[string]float64 {
	out := map[string]float64{}
	for _, r := range sidecarResources {
		out[r] = p.sum("apiserver_longrunning_requests", `verb="WATCH"`, `resource="`+r+`"`)
	}
	return out
}

// churnEnv is what the churn phase needs from the rest of the bench.
type churnEnv struct {
	admin      kubernetes.Interface
	sidecar    *benchProc
	metricsURL string
	// watches is how many watches the apiserver serves to the sidecar, per
	// resource: the difference across its start.
	watches map[string]float64
}

// runChurn creates an EndpointSlice for every loaded Service, measures
// the sidecar idle, then churns Node statuses and EndpointSlices at the
// flags' rates and reports the sidecar's CPU, its renders and reloads,
// and the watch events it was sent.
func runChurn(b *testing.B, e churnEnv) {
	if *benchChurn <= 0 {
		return
	}
	ctx := context.Background()
	start := time.Now()
	slices := make([]*discoveryv1.EndpointSlice, *benchServices)
	parallel(b, *benchServices, 16, func(i int) error {
		s, err := e.admin.DiscoveryV1().EndpointSlices("default").Create(ctx, benchSlice(i), metav1.CreateOptions{})
		slices[i] = s
		return err
	})
	b.Logf("%d endpointslices created in %s", len(slices), time.Since(start).Round(time.Millisecond))
	// Let the sidecar take the slices in before measuring it idle.
	time.Sleep(5 * time.Second)

	cpu0 := cpuSeconds(b, e.sidecar.PID())
	time.Sleep(*benchIdle)
	idlePct := 100 * (cpuSeconds(b, e.sidecar.PID()) - cpu0) / benchIdle.Seconds()

	side0, api0 := scrapeURL(b, e.metricsURL), scrapeAPIServer(b, e.admin)
	cpu0 = cpuSeconds(b, e.sidecar.PID())
	t0 := time.Now()
	churnCtx, cancel := context.WithTimeout(ctx, *benchChurn)
	defer cancel()
	var nodeUpdates, sliceUpdates atomic.Int64
	var failed churnFailures
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); churnNodes(churnCtx, e.admin, &nodeUpdates, &failed) }()
	go func() { defer wg.Done(); churnSlices(churnCtx, e.admin, slices, &sliceUpdates, &failed) }()
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := cpuSeconds(b, e.sidecar.PID()) - cpu0
	side1, api1 := scrapeURL(b, e.metricsURL), scrapeAPIServer(b, e.admin)

	delta := func(a, b promText, metric string, labels ...string) float64 {
		return b.sum(metric, labels...) - a.sum(metric, labels...)
	}
	var events, ignored, bytes float64
	for _, r := range sidecarResources {
		got := delta(side0, side1, "vipctl_runtimecfg_watch_events_total", `resource="`+r+`"`)
		events += got
		ignored += delta(side0, side1, "vipctl_runtimecfg_watch_events_total", `resource="`+r+`"`, `action="ignored"`)
		// The apiserver measures event sizes per resource, over every
		// watcher; the sidecar's share is its events at the mean size.
		sent := delta(api0, api1, "apiserver_watch_events_sizes_count", `resource="`+r+`"`)
		if sent > 0 {
			bytes += got * delta(api0, api1, "apiserver_watch_events_sizes_sum", `resource="`+r+`"`) / sent
		}
		b.Logf("churn: %s: the sidecar got %.0f events; the apiserver sent %.0f to all its watchers", r, got, sent)
	}
	b.Logf("churn: the sidecar ran %.0f garbage collections; heap in use at the end %.0f MiB",
		delta(side0, side1, "go_gc_duration_seconds_count"), side1.sum("go_memstats_heap_inuse_bytes")/(1<<20))
	var watches float64
	for r, n := range e.watches {
		b.Logf("sidecar watches on %s: %.0f", r, n)
		watches += n
	}
	// A write the loaded apiserver refused or timed out lowers the
	// achieved rate, which the line reports; it does not void the run.
	if n := failed.n.Load(); n > 0 {
		b.Logf("churn: %d updates failed, the first: %v", n, failed.first.Load())
	}
	s := elapsed.Seconds()
	fmt.Printf("runtimecfg phase=churn nodes=%d services=%d minutes=%.1f node_updates_per_s=%.1f slice_updates_per_s=%.1f idle_cpu_pct_of_core=%.2f cpu_pct_of_core=%.2f renders=%.0f reloads=%.0f watches=%.0f watch_events=%.0f watch_events_ignored=%.0f watch_kib_per_s=%.1f failed_updates=%d\n",
		*benchNodes, *benchServices, elapsed.Minutes(), float64(nodeUpdates.Load())/s, float64(sliceUpdates.Load())/s,
		idlePct, 100*cpu/s,
		delta(side0, side1, "vipctl_runtimecfg_renders_total"), delta(side0, side1, "vipctl_runtimecfg_reloads_total"),
		watches, events, ignored, bytes/1024/s, failed.n.Load())
}

// churnFailures counts the churn's failed writes and keeps the first
// error. The writes run to their end after the churn's (their context
// is not cancelled), so none is cut short.
type churnFailures struct {
	n     atomic.Int64
	first atomic.Value
}

func (f *churnFailures) add(err error) {
	f.n.Add(1)
	f.first.CompareAndSwap(nil, err.Error())
}

// benchSlice is Service load-i's EndpointSlice: two ready endpoints on
// two nodes, as a small Deployment's would be.
func benchSlice(i int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("load-%05d", i)
	ep := func(j int) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{
			Addresses:  []string{canonical(fmt.Sprintf("fd00:10::%x:%x", i, j))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(fmt.Sprintf("node-%04d", (i*7+j*13)%*benchNodes)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("%s-%d", name, j)},
		}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-x7k2p", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints:   []discoveryv1.Endpoint{ep(0), ep(1)},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// canonical is the form the API accepts for an address.
func canonical(addr string) string { return netip.MustParseAddr(addr).String() }

// churnNodes posts every Node's status once per -bench-node-status-period
// as the kubelet does: its conditions with a new heartbeat time.
func churnNodes(ctx context.Context, c kubernetes.Interface, done *atomic.Int64, failed *churnFailures) {
	req := context.WithoutCancel(ctx)
	next := make(chan int, 64)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // the churn is over: drain what was queued
				}
				if _, err := c.CoreV1().Nodes().Patch(req, fmt.Sprintf("node-%04d", i), types.StrategicMergePatchType,
					nodeStatusPatch(time.Now()), metav1.PatchOptions{}, "status"); err != nil {
					failed.add(err)
					continue
				}
				done.Add(1)
			}
		}()
	}
	tick := time.NewTicker(*benchNodeStatusPeriod / time.Duration(*benchNodes))
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % *benchNodes {
		select {
		case <-ctx.Done():
			close(next)
			wg.Wait()
			return
		case <-tick.C:
		}
		select {
		case next <- i:
		default: // the apiserver is behind: the measured rate says so
		}
	}
}

func nodeStatusPatch(now time.Time) []byte {
	ts := now.UTC().Format(time.RFC3339)
	var conds []string
	for _, c := range []struct{ typ, status, reason string }{
		{"MemoryPressure", "False", "KubeletHasSufficientMemory"},
		{"DiskPressure", "False", "KubeletHasNoDiskPressure"},
		{"PIDPressure", "False", "KubeletHasSufficientPID"},
		{"Ready", "True", "KubeletReady"},
	} {
		conds = append(conds, fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":"kubelet is posting its status","lastHeartbeatTime":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}`,
			c.typ, c.status, c.reason, ts))
	}
	return []byte(`{"status":{"conditions":[` + strings.Join(conds, ",") + `]}}`)
}

// churnSlices updates -bench-slice-updates EndpointSlices a second, each
// time one endpoint of a random Service: turning unready or ready again,
// or its pod replaced on another node.
func churnSlices(ctx context.Context, c kubernetes.Interface, slices []*discoveryv1.EndpointSlice, done *atomic.Int64, failed *churnFailures) {
	req := context.WithoutCancel(ctx)
	tick := time.NewTicker(time.Duration(float64(time.Second) / *benchSliceRate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := rand.IntN(len(slices))
		s := slices[i].DeepCopy()
		ep := &s.Endpoints[n%2]
		if n%3 == 0 {
			ep.NodeName = ptr.To(fmt.Sprintf("node-%04d", rand.IntN(*benchNodes)))
			ep.Addresses = []string{canonical(fmt.Sprintf("fd00:11::%x:%x", i, n))}
		} else {
			ep.Conditions.Ready = ptr.To(!*ep.Conditions.Ready)
		}
		got, err := c.DiscoveryV1().EndpointSlices("default").Update(req, s, metav1.UpdateOptions{})
		if err != nil {
			failed.add(err)
			continue
		}
		slices[i] = got
		done.Add(1)
	}
}
