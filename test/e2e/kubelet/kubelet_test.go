package kubelet

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// kubeletCluster is three control-plane nodes, each with its own
// containerd and kubelet running the static pods of the MachineConfig
// `vipctl render` wrote, in vipctl's image; a client namespace; and the
// test apiserver the sidecars watch with their node credentials.
type kubeletCluster struct {
	lab     *netlab.Lab
	api     *testapiserver.Server
	admin   kubernetes.Interface
	client  *netlab.Host
	nodes   []*kubeletlab.Node
	cfgPath string
	adminKC string
	vipctl  string
	// pods are the static pods every node runs.
	pods []string
}

const (
	kubeletAPIVIP   = "198.51.100.5"
	kubeletPoolCIDR = "198.51.100.128/26"
	// kubeletEchoPort is where every node answers for the Service VIPs it
	// holds (a stand-in for the Service's endpoints).
	kubeletEchoPort = 8080
)

var kubeletNodeIPs = map[string]string{"master-0": "198.51.100.11", "master-1": "198.51.100.12", "master-2": "198.51.100.13"}

// kubeletClusterYAML names the image explicitly (an images: override, as
// for a mirror): the one `make image` built, whatever version this test
// binary reports.
func kubeletClusterYAML(image, profile string) string {
	return fmt.Sprintf(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: kubelab
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api:
    vips: [%s]
  servicePools:
    - name: general
      addresses: [%s]
  vrrp:
    profile: %s
  images:
    keepalived: %s
    haproxy: %s
    vipctl: %s
`, kubeletAPIVIP, kubeletPoolCIDR, profile, image, image, image)
}

func startKubeletCluster(t testing.TB, profile string) *kubeletCluster {
	t.Helper()
	return startKubeletClusterFrom(t, func(image string) string { return kubeletClusterYAML(image, profile) })
}

// startKubeletClusterFrom is startKubeletCluster with the cluster file
// clusterYAML writes for the image under test.
func startKubeletClusterFrom(t testing.TB, clusterYAML func(image string) string) *kubeletCluster {
	t.Helper()
	bin := kubeletlab.Require(t)
	vipctl := filepath.Join(bin, "vipctl")
	if _, err := os.Stat(vipctl); err != nil {
		t.Fatalf("bin/vipctl not built (make build; make test does): %v", err)
	}
	imageTar := filepath.Join(bin, "vipctl-image.tar")
	image := kubeletlab.ImageName(t, imageTar)

	api := testapiserver.Start(t)
	kc := &kubeletCluster{api: api, admin: kubernetes.NewForConfigOrDie(api.AdminConfig()), vipctl: vipctl}
	dir := t.TempDir()
	kc.cfgPath = filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(kc.cfgPath, []byte(clusterYAML(image)), 0o644); err != nil {
		t.Fatal(err)
	}
	kc.adminKC = filepath.Join(dir, "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, api.AdminConfig(), kc.adminKC)

	// Nodes as `oc get nodes -o yaml` prints them: the render's bootstrap
	// list and the apiserver's Node objects.
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	ctx := context.Background()
	for _, name := range kubeletNodeNames() {
		node := corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: kubeletNodeIPs[name]}}},
		}
		data, err := json.Marshal(node)
		if err != nil {
			t.Fatal(err)
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: data})
		created, err := kc.admin.CoreV1().Nodes().Create(ctx, &node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = node.Status.Addresses
		if _, err := kc.admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodesYAML, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	nodesPath := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(nodesPath, nodesYAML, 0o644); err != nil {
		t.Fatal(err)
	}

	// What an administrator does: render, apply the manifests, let the
	// MCO lay the MachineConfig on every node.
	out := filepath.Join(dir, "out")
	if b, err := exec.Command(vipctl, "render", "-f", kc.cfgPath, "--nodes", nodesPath, "--out-dir", out).CombinedOutput(); err != nil {
		t.Fatalf("vipctl render: %v\n%s", err, b)
	}
	cfg, err := v1alpha1.Load(kc.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	kc.pods = []string{onnode.KeepalivedPodName, onnode.HaproxyPodName}
	if cfg.PoolsOnly() {
		kc.pods = kc.pods[:1]
	}
	for _, ns := range []string{onnode.Namespace} {
		if _, err := kc.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if _, err := kc.admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	objs, err := manifests.Objects(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lab.ApplyObjects(t, api.AdminConfig(), objs)
	mcYAML, err := os.ReadFile(filepath.Join(out, "machineconfigs", bundle.MachineConfigName("master")+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := kubeletlab.MachineConfigFiles(mcYAML)
	if err != nil {
		t.Fatal(err)
	}

	kc.lab = netlab.New(t)
	kc.client = kc.lab.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	hosts := map[string]*netlab.Host{}
	for _, name := range kubeletNodeNames() {
		h := kc.lab.AddHost(name, netlab.HostOpts{Addrs: []string{kubeletNodeIPs[name] + "/24"}})
		hosts[name] = h
		kc.forwardAPI(t, h)
		serveStandInAPIServer(t, h, kubeletNodeIPs[name])
		h.Serve(net.JoinHostPort("0.0.0.0", strconv.Itoa(kubeletEchoPort)), func(c net.Conn) { answerHTTP(c, h.Name) })
	}
	for _, name := range kubeletNodeNames() {
		nodeCfg := api.NodeConfig(t, name)
		kcPath := filepath.Join(dir, name+".kubeconfig")
		testapiserver.WriteKubeconfig(t, nodeCfg, kcPath)
		kubeconfig, err := os.ReadFile(kcPath)
		if err != nil {
			t.Fatal(err)
		}
		kc.nodes = append(kc.nodes, kubeletlab.Start(t, kubeletlab.Options{
			Name: name, Host: hosts[name], NodeIP: kubeletNodeIPs[name],
			Files: files, Kubeconfig: kubeconfig, Images: []string{imageTar},
		}))
	}
	// Runs before each node's own cleanup: logs while the nodes still
	// run, then every node torn down at once.
	t.Cleanup(func() { kubeletlab.StopAll(kc.nodes) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range kc.nodes {
				t.Logf("%s%s", n.Logs(20), n.ContainerLogs(20))
			}
		}
	})
	return kc
}

func kubeletNodeNames() []string { return []string{"master-0", "master-1", "master-2"} }

// forwardAPI makes the test apiserver (on the machine's loopback) answer
// on the same address inside the node's namespace, so the node's
// kubeconfig works there unchanged.
func (kc *kubeletCluster) forwardAPI(t testing.TB, h *netlab.Host) {
	t.Helper()
	hostport := strings.TrimPrefix(kc.api.URL, "https://")
	h.RelayTCP(hostport, hostport)
}

// serveStandInAPIServer answers https://IP:6443/readyz inside the node, as
// the node's kube-apiserver would: haproxy's backends.
func serveStandInAPIServer(t testing.TB, h *netlab.Host, ip string) {
	t.Helper()
	var l net.Listener
	if err := h.Do(func() (err error) { l, err = net.Listen("tcp", net.JoinHostPort(ip, "6443")); return err }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, h.Name)
	}))
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
}

func answerHTTP(c net.Conn, name string) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	if _, err := c.Read(buf); err != nil {
		return
	}
	_, _ = fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(name), name)
}

func (kc *kubeletCluster) waitPodsReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	for _, n := range kc.nodes {
		for _, pod := range kc.pods {
			lab.WaitFor(t, timeout, n.Name+" "+pod+" Ready", func() bool {
				p, err := n.Pod(context.Background(), pod)
				return err == nil && kubeletlab.PodReady(p)
			})
		}
	}
}

// serving waits until every pod is Ready and the API VIP answers, and
// returns the one node that holds it.
func (kc *kubeletCluster) serving(t testing.TB) string {
	t.Helper()
	kc.waitPodsReady(t, 180*time.Second)
	lab.WaitFor(t, 30*time.Second, "API VIP answering", func() bool { _, err := kc.get(apiVIPURL()); return err == nil })
	holder := kc.holders(t, kubeletAPIVIP)
	if len(holder) != 1 {
		t.Fatalf("API VIP held by %v, want one node", holder)
	}
	return holder[0]
}

// get asks url from the client namespace with a 250 ms timeout, and
// returns the body.
func (kc *kubeletCluster) get(url string) (string, error) {
	return kc.getWithin(url, benchRequestTimeout)
}

// benchRequestTimeout is how long the failover benchmarks wait for one
// answer: it is the resolution of their outage numbers.
// handoverRequestTimeout is how long a test of a planned handover waits:
// a request answered within a second is not lost to any real client, and
// on two loaded cores a TLS /readyz through haproxy sometimes needs more
// than 250 ms.
const (
	benchRequestTimeout    = 250 * time.Millisecond
	handoverRequestTimeout = time.Second
)

// getWithin asks url from the client namespace, waiting at most timeout,
// and returns the body.
func (kc *kubeletCluster) getWithin(url string, timeout time.Duration) (string, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:       kc.client.DialContext,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // stand-in apiservers
	}}
	return probe.Get(context.Background(), c, url)
}

func apiVIPURL() string {
	return "https://" + net.JoinHostPort(kubeletAPIVIP, strconv.Itoa(v1alpha1.DefaultLoadBalancerPort)) + "/readyz"
}

// holders are the nodes whose interface carries addr.
func (kc *kubeletCluster) holders(t testing.TB, addr string) []string {
	t.Helper()
	var out []string
	for _, n := range kc.nodes {
		b, err := n.Host.Exec("ip", "-o", "addr", "show", "dev", n.Host.Iface)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), " "+addr+"/") {
			out = append(out, n.Name)
		}
	}
	return out
}

func (kc *kubeletCluster) node(name string) *kubeletlab.Node {
	for _, n := range kc.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// kubeletPoller asks url every 10 ms from the client until stopped, each
// request waiting at most its timeout, and counts failures.
type kubeletPoller struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	ok   int
	// failed are the failed requests' errors.
	failed []string
	// asked is every request's start and whether it was answered, for
	// the failover benchmark; in the order they started once stopped.
	asked []kubeletRequest
}

type kubeletRequest struct {
	start time.Time
	ok    bool
}

// firstOKAfter is the start of the first answered request after t.
func (p *kubeletPoller) firstOKAfter(t time.Time) (time.Time, bool) {
	for _, r := range p.asked {
		if r.ok && r.start.After(t) {
			return r.start, true
		}
	}
	return time.Time{}, false
}

// longestGap is the longest run of failed requests, from the first
// failure's start to the next answered request's start.
func (p *kubeletPoller) longestGap() time.Duration {
	var longest time.Duration
	var from time.Time
	for _, r := range p.asked {
		switch {
		case !r.ok && from.IsZero():
			from = r.start
		case r.ok && !from.IsZero():
			longest = max(longest, r.start.Sub(from))
			from = time.Time{}
		}
	}
	return longest
}

// poll starts asking url. One at a time (concurrent false), a request
// that hangs on a lost holder holds the next one back for up to its
// timeout, so the first answer after a failover comes up to a timeout
// late: the benchmarks ask concurrently, a new request every 10 ms
// whatever the earlier ones do, as the process lab's client does.
func (kc *kubeletCluster) poll(url string, timeout time.Duration, concurrent bool) *kubeletPoller {
	p := &kubeletPoller{stop: make(chan struct{}), done: make(chan struct{})}
	request := func() {
		start := time.Now()
		_, err := kc.getWithin(url, timeout)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.failed = append(p.failed, fmt.Sprintf("%s: %v", start.Format("15:04:05.000"), err))
		} else {
			p.ok++
		}
		p.asked = append(p.asked, kubeletRequest{start: start, ok: err == nil})
	}
	go func() {
		var inFlight sync.WaitGroup
		defer close(p.done)
		defer inFlight.Wait()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			if concurrent {
				inFlight.Go(request)
			} else {
				request()
			}
		}
	}()
	return p
}

// Stop stops asking, waits for the requests in flight and puts them in
// the order they started.
func (p *kubeletPoller) Stop() {
	close(p.stop)
	<-p.done
	sort.SliceStable(p.asked, func(i, j int) bool { return p.asked[i].start.Before(p.asked[j].start) })
}

// TestKubeletPlannedHandover: a Service of type LoadBalancer created in
// the apiserver gets an address from the pool (the allocator) and answers
// on it from the client namespace through the nodes' keepalived pods;
// then removing the holder's keepalived manifest makes the kubelet run
// the pod's real preStop hook (the drain), and a client polling the API
// VIP and that Service VIP every 10 ms loses no request: none goes a
// second without an answer.
func TestKubeletPlannedHandover(t *testing.T) {
	kc := startKubeletCluster(t, v1alpha1.ProfileFast)
	kc.waitPodsReady(t, 180*time.Second)
	svcVIP := kc.serviceVIP(t, "web")
	svcURL := "http://" + net.JoinHostPort(svcVIP, strconv.Itoa(kubeletEchoPort)) + "/"
	for _, u := range []string{apiVIPURL(), svcURL} {
		lab.WaitFor(t, 30*time.Second, u+" answering", func() bool { _, err := kc.get(u); return err == nil })
	}
	api, svc := kc.poll(apiVIPURL(), handoverRequestTimeout, false), kc.poll(svcURL, handoverRequestTimeout, false)
	time.Sleep(500 * time.Millisecond)
	// Drain the API VIP's holder, then the Service VIP's if that is
	// another node: each VIP leaves its holder through the preStop hook.
	drained := map[string]bool{}
	for _, vip := range []string{kubeletAPIVIP, svcVIP} {
		holder := kc.holders(t, vip)
		if len(holder) != 1 {
			t.Fatalf("%s held by %v, want one node", vip, holder)
		}
		if drained[holder[0]] {
			continue
		}
		drained[holder[0]] = true
		n := kc.node(holder[0])
		if err := n.RemoveFile(onnode.StaticPodDir + "/" + onnode.KeepalivedPodName + ".yaml"); err != nil {
			t.Fatal(err)
		}
		lab.WaitFor(t, 60*time.Second, vip+" held by another node than "+n.Name, func() bool {
			h := kc.holders(t, vip)
			return len(h) == 1 && h[0] != n.Name
		})
		lab.WaitFor(t, 60*time.Second, n.Name+"'s keepalived pod gone", func() bool {
			p, err := n.Pod(context.Background(), onnode.KeepalivedPodName)
			return err == nil && p == nil
		})
		t.Logf("%s drained through the kubelet (preStop): %s moved", n.Name, vip)
	}
	time.Sleep(time.Second)
	api.Stop()
	svc.Stop()
	t.Logf("API VIP: %d ok, %d failed; Service VIP %s: %d ok, %d failed", api.ok, len(api.failed), svcVIP, svc.ok, len(svc.failed))
	if len(api.failed)+len(svc.failed) > 0 {
		t.Errorf("failed requests during the planned handover:\nAPI: %s\nService: %s", strings.Join(api.failed, "\n"), strings.Join(svc.failed, "\n"))
	}
}

// TestKubeletSidecarAddressLeavesWithPod: a pool with announce: sidecar
// under the real kubelet. Removing the holder's keepalived manifest stops
// the pod (every container told at once, keepalived's preStop drain
// first); the Service address moves to a peer, and once the pod is gone
// the old holder's interface no longer has it: the sidecar, kept running
// by its own preStop until after keepalived's drain, removed it with the
// anchor. Without that preStop the address stayed on the old holder
// beside the new one's (two nodes answering ARP for it) until a sidecar
// ran there again.
func TestKubeletSidecarAddressLeavesWithPod(t *testing.T) {
	kc := startKubeletClusterFrom(t, func(image string) string {
		return strings.Replace(kubeletClusterYAML(image, v1alpha1.ProfileFast),
			"      addresses: ["+kubeletPoolCIDR+"]\n", "      addresses: ["+kubeletPoolCIDR+"]\n      announce: sidecar\n", 1)
	})
	kc.waitPodsReady(t, 180*time.Second)
	vip := kc.serviceVIP(t, "web")
	url := "http://" + net.JoinHostPort(vip, strconv.Itoa(kubeletEchoPort)) + "/"
	lab.WaitFor(t, 30*time.Second, vip+" answering", func() bool { _, err := kc.get(url); return err == nil })
	holders := kc.holders(t, vip)
	if len(holders) != 1 {
		t.Fatalf("%s held by %v, want one node", vip, holders)
	}
	n := kc.node(holders[0])
	if err := n.RemoveFile(onnode.StaticPodDir + "/" + onnode.KeepalivedPodName + ".yaml"); err != nil {
		t.Fatal(err)
	}
	// The kubelet drops the mirror pod at once; the containers stop
	// after the preStop hooks. Within 30 s the address must be on the
	// new holder alone: without the sidecar's preStop it stayed on the
	// old one for good (no sidecar ran there again).
	if !lab.WaitUntil(30*time.Second, func() bool { h := kc.holders(t, vip); return len(h) == 1 && h[0] != n.Name }) {
		t.Errorf("30s after %s's keepalived manifest went, %s is on %v: want it on one other node alone", n.Name, vip, kc.holders(t, vip))
		for _, m := range kc.nodes {
			b, _ := m.Host.Exec("ip", "-o", "addr", "show", "dev", m.Host.Iface)
			t.Logf("%s: %s", m.Name, b)
		}
	}
	if _, err := kc.get(url); err != nil {
		t.Errorf("%s after the move: %v", url, err)
	}
}

// TestKubeletPoolsOnlyServesService: mode poolsOnly under the real
// kubelet, as beside OpenShift's own keepalived: the MachineConfig lays
// no haproxy pod on the masters, the keepalived pod without haproxy's
// directories becomes Ready on every node, and a LoadBalancer Service
// gets an address from the pool that answers from the client namespace.
func TestKubeletPoolsOnlyServesService(t *testing.T) {
	kc := startKubeletClusterFrom(t, func(image string) string {
		return fmt.Sprintf(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: kubelab
spec:
  baseDomain: example.test
  mode: poolsOnly
  machineNetworks: [198.51.100.0/24]
  servicePools:
    - name: general
      addresses: [%s]
  vrrp:
    profile: fast
  images:
    keepalived: %s
    haproxy: %s
    vipctl: %s
`, kubeletPoolCIDR, image, image, image)
	})
	kc.waitPodsReady(t, 180*time.Second)
	for _, n := range kc.nodes {
		if p, err := n.Pod(context.Background(), onnode.HaproxyPodName); err != nil || p != nil {
			t.Errorf("%s: haproxy pod %v (err %v) in mode poolsOnly", n.Name, p != nil, err)
		}
	}
	vip := kc.serviceVIP(t, "web")
	url := "http://" + net.JoinHostPort(vip, strconv.Itoa(kubeletEchoPort)) + "/"
	lab.WaitFor(t, 30*time.Second, "Service VIP "+vip+" answering", func() bool { _, err := kc.get(url); return err == nil })
}

// serviceVIP creates a LoadBalancer Service, lets the allocator give it an
// address, and returns the address.
func (kc *kubeletCluster) serviceVIP(t testing.TB, name string) string {
	t.Helper()
	return kc.serviceVIPFrom(t, name, "")
}

// serviceVIPFrom is serviceVIP asking for a pool by name ("": any pool
// that assigns automatically).
func (kc *kubeletCluster) serviceVIPFrom(t testing.TB, name, pool string) string {
	t.Helper()
	lab.StartAllocator(t, kc.api, lab.AllocatorToken(t, kc.admin), "allocator-0")
	ctx := context.Background()
	var annotations map[string]string
	if pool != "" {
		annotations = map[string]string{v1alpha1.AnnotationPool: pool}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: kubeletEchoPort, Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := kc.admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vip string
	lab.WaitFor(t, 30*time.Second, "Service "+name+" given an address", func() bool {
		s, err := kc.admin.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false
		}
		vip = s.Status.LoadBalancer.Ingress[0].IP
		return true
	})
	return vip
}
