package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

var (
	benchNodes    = flag.Int("bench-nodes", 2000, "BenchmarkRuntimecfg: Nodes loaded")
	benchServices = flag.Int("bench-services", 5000, "BenchmarkRuntimecfg: LoadBalancer Services loaded")
	benchProbes   = flag.Int("bench-probes", 200, "BenchmarkRuntimecfg: Services created and timed after the load")
	benchBinary   = flag.String("vipctl", "", "BenchmarkRuntimecfg: the vipctl binary to run (make bench-runtimecfg passes the one make build wrote); empty builds one")
)

// benchCluster is all IPv6: 2000 node addresses do not fit the IPv4
// documentation ranges.
const benchCluster = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: bench}
spec:
  baseDomain: example.test
  machineNetworks: ["2001:db8:1::/64"]
  api: {vips: ["2001:db8:1::5"]}
  servicePools:
    - name: bench
      addresses: ["2001:db8:1::1:0/112"]
      nodeSelector: {pool: bench}
`

// buildVipctl builds the vipctl binary once per test binary, unless
// -vipctl names one: the sidecar's resident set depends on how the binary
// was built, so the benchmark measures the one that ships.
var buildVipctl = sync.OnceValues(func() (string, error) {
	if *benchBinary != "" {
		return *benchBinary, nil
	}
	dir, err := os.MkdirTemp("", "vipctl-bin-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "vipctl")
	if err := lab.GoBuild(bin, "github.com/vipctl/vipctl/cmd/vipctl"); err != nil {
		return "", err
	}
	return bin, nil
})

// builtDir holds the binary buildVipctl built, removed by TestMain when
// the test binary is done.
var builtDir string

// TestMain removes what buildVipctl built: every test binary run would
// otherwise leave a 75 MB vipctl in the temporary directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// BenchmarkRuntimecfg loads Nodes and LoadBalancer Services into a real
// kube-apiserver, runs the allocator and one node's sidecar as separate
// processes (with the ServiceAccount and node credentials they have in a
// cluster), then times Service created → its VIP in the keepalived.conf
// the sidecar wrote, and reports the sidecar's peak RSS and any address
// handed out twice. `make bench-runtimecfg` prints the line.
func BenchmarkRuntimecfg(b *testing.B) {
	for b.Loop() {
		runRuntimecfgBench(b)
	}
}

func runRuntimecfgBench(b *testing.B) {
	bin, err := buildVipctl()
	if err != nil {
		b.Fatal(err)
	}
	env := startAllocEnv(b, benchCluster)
	api, admin := env.api, env.admin
	ctx := context.Background()
	dir := b.TempDir()
	cfgPath := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cfgPath, []byte(benchCluster), 0o644); err != nil {
		b.Fatal(err)
	}
	allocatorKubeconfig := filepath.Join(dir, "allocator.kubeconfig")
	testapiserver.WriteKubeconfig(b, api.TokenConfig(env.token), allocatorKubeconfig)

	// Nodes: three control-plane, eight in the pool (the bench node is one
	// of them, so every pool VIP is in its keepalived.conf).
	const benchNode = "node-0100"
	start := time.Now()
	parallel(b, *benchNodes, 16, func(i int) error {
		labels := map[string]string{"node-role.kubernetes.io/worker": ""}
		if i < 3 {
			labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}
		if i >= 100 && i < 108 {
			labels["pool"] = "bench"
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: labels}}
		created, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::%x", 0x1000+i)}}
		_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	b.Logf("%d nodes in %s", *benchNodes, time.Since(start).Round(time.Millisecond))

	alloc := startProcess(b, bin, "allocator", "--kubeconfig", allocatorKubeconfig, "--id", "bench-allocator", "--listen", "")
	start = time.Now()
	parallel(b, *benchServices, 16, func(i int) error {
		_, err := admin.CoreV1().Services("default").Create(ctx, benchService(fmt.Sprintf("load-%05d", i)), metav1.CreateOptions{})
		return err
	})
	waitAllocated(b, admin, *benchServices, alloc)
	b.Logf("%d services created and allocated in %s", *benchServices, time.Since(start).Round(time.Millisecond))

	// The sidecar, with the bench node's own credentials, its config tests
	// run in a lab namespace that has br-ex.
	lab := netlab.New(b)
	judge := lab.AddHost("judge", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"2001:db8:1::1064/64"}})
	root := filepath.Join(dir, "node")
	for _, d := range []string{onnode.RunDir, onnode.KeepalivedDir, onnode.HaproxyDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	nodeKubeconfig := filepath.Join(dir, "node.kubeconfig")
	testapiserver.WriteKubeconfig(b, api.NodeConfig(b, benchNode), nodeKubeconfig)
	bootstrap := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(bootstrap, []byte(benchBootstrapNodes(benchNode)), 0o644); err != nil {
		b.Fatal(err)
	}
	watches := apiWatches(scrapeAPIServer(b, admin))
	listen := fmt.Sprintf("127.0.0.1:%d", freeLocalPort(b))
	heap := newHeapProfiler(b)
	sidecar := startProcessEnv(b, heap.Env(), bin, append([]string{"runtimecfg", "--config", cfgPath, "--bootstrap-nodes", bootstrap, "--node-name", benchNode,
		"--kubeconfig", nodeKubeconfig, "--listen", listen, "--root", root, "--netns", judge.NS}, heap.Args()...)...)
	rssSamples := sampleRSS(sidecar.PID())
	conf := filepath.Join(root, onnode.KeepalivedConfPath)
	start = time.Now()
	waitUntilOrFatal(b, 10*time.Minute, "the sidecar renders every loaded Service", sidecar, func() bool {
		data, _ := os.ReadFile(conf)
		return strings.Count(string(data), "/128 dev br-ex") >= *benchServices
	})
	b.Logf("sidecar rendered %d service VIPs %s after start", *benchServices, time.Since(start).Round(time.Millisecond))
	heap.Take(b, sidecar, "rendered.pprof")
	for r, n := range apiWatches(scrapeAPIServer(b, admin)) {
		watches[r] = n - watches[r]
	}

	var lat []time.Duration
	for i := 0; i < *benchProbes; i++ {
		name := fmt.Sprintf("probe-%04d", i)
		t0 := time.Now()
		if _, err := admin.CoreV1().Services("default").Create(ctx, benchService(name), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var ip string
		waitUntilOrFatal(b, time.Minute, name+" allocated", alloc, func() bool {
			s, err := admin.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
				ip = s.Status.LoadBalancer.Ingress[0].IP
			}
			return ip != ""
		})
		want := "        " + netip.MustParseAddr(ip).String() + "/128 dev"
		waitUntilOrFatal(b, time.Minute, name+"'s VIP in keepalived.conf", sidecar, func() bool {
			data, _ := os.ReadFile(conf)
			return strings.Contains(string(data), want)
		})
		lat = append(lat, time.Since(t0))
	}
	// The handover table and the local routes are part of every sync: at
	// this scale they must work too, not just the config.
	for _, l := range strings.Split(sidecar.log.String(), "\n") {
		if strings.Contains(l, "handover table not written") || strings.Contains(l, "keeping the VIPs local") {
			b.Errorf("sidecar: %s", l)
			break
		}
	}
	rss := peakRSSMiB(b, sidecar.PID())
	anon, file, samples := rssSamples.Peak()
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sidecar.PID())); err == nil {
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "Vm") || strings.HasPrefix(l, "Rss") {
				b.Log(l)
			}
		}
	}
	dups := duplicateAddresses(b, admin)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("runtimecfg nodes=%d services=%d rss_mib=%d p50_ms=%d p95_ms=%d duplicates=%d peak_anon_mib=%d peak_file_mib=%d\n",
		*benchNodes, *benchServices, rss, failoverbench.Percentile(lat, 50).Milliseconds(), failoverbench.Percentile(lat, 95).Milliseconds(), dups, anon, file)
	runChurn(b, churnEnv{admin: admin, sidecar: sidecar, metricsURL: "http://" + listen + "/metrics", watches: watches})
	heap.Take(b, sidecar, "end.pprof")
	heap.Save(b, sidecar, samples)
}

func benchService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		// 5000 LoadBalancer Services would exhaust the NodePort range.
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}},
			IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}, AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
}

// benchBootstrapNodes is the init container's node list: the bench node
// and one peer are enough to render before the API answers.
func benchBootstrapNodes(node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Node, metadata: {name: node-0000, labels: {node-role.kubernetes.io/control-plane: ""}}, status: {addresses: [{type: InternalIP, address: "2001:db8:1::1000"}]}}
  - {apiVersion: v1, kind: Node, metadata: {name: node-0001, labels: {node-role.kubernetes.io/control-plane: ""}}, status: {addresses: [{type: InternalIP, address: "2001:db8:1::1001"}]}}
  - {apiVersion: v1, kind: Node, metadata: {name: %s, labels: {pool: bench}}, status: {addresses: [{type: InternalIP, address: "2001:db8:1::1064"}]}}
  - {apiVersion: v1, kind: Node, metadata: {name: node-0101, labels: {pool: bench}}, status: {addresses: [{type: InternalIP, address: "2001:db8:1::1065"}]}}
`, node)
}

func parallel(b *testing.B, n, workers int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// benchProc is a vipctl process the bench started; it is stopped by PID.
type benchProc struct {
	cmd    *exec.Cmd
	log    *lab.LogBuffer
	exited chan struct{}
}

func (p *benchProc) PID() int { return p.cmd.Process.Pid }

// Exited tells whether the process has ended.
func (p *benchProc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// LogTail is the last n lines of its output.
func (p *benchProc) LogTail(n int) string { return p.log.Tail(n) }

func startProcess(b testing.TB, bin string, args ...string) *benchProc {
	b.Helper()
	return startProcessEnv(b, nil, bin, args...)
}

// startProcessEnv is startProcess with env as the process's environment
// (nil: this one's).
func startProcessEnv(b testing.TB, env []string, bin string, args ...string) *benchProc {
	b.Helper()
	p := &benchProc{cmd: exec.Command(bin, args...), log: &lab.LogBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if b.Failed() {
			b.Logf("--- vipctl %s log:\n%s", args[0], p.log.Tail(40))
		}
	})
	return p
}

func waitUntilOrFatal(b *testing.B, timeout time.Duration, what string, p *benchProc, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s; log:\n%s", what, p.log.Tail(20))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitAllocated(b *testing.B, c kubernetes.Interface, n int, alloc *benchProc) {
	b.Helper()
	waitUntilOrFatal(b, 15*time.Minute, fmt.Sprintf("%d services allocated", n), alloc, func() bool {
		time.Sleep(time.Second)
		list, err := c.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false
		}
		got := 0
		for _, s := range list.Items {
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) > 0 {
				got++
			}
		}
		return got >= n
	})
}

func duplicateAddresses(b *testing.B, c kubernetes.Interface) int {
	b.Helper()
	list, err := c.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]int{}
	for _, s := range list.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			seen[in.IP]++
		}
	}
	d := 0
	for _, n := range seen {
		if n > 1 {
			d++
		}
	}
	return d
}

// peakRSSMiB reads the process's high-water resident set.
func peakRSSMiB(b *testing.B, pid int) int {
	b.Helper()
	kb := procStatusKB(pid, "VmHWM:")
	if kb == 0 {
		b.Fatalf("no VmHWM for pid %d", pid)
	}
	return (kb + 1023) / 1024
}
