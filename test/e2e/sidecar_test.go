package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/vipctl/vipctl/internal/testapiserver"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// syncBuffer collects a sidecar's log for assertions.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sidecar is one node's running runtimecfg sidecar, in process but with
// the node's own credentials, its namespace's addresses and its daemons.
type sidecar struct {
	s      *runtimecfg.Sidecar
	m      *runtimecfg.Metrics
	log    *syncBuffer
	cancel context.CancelFunc
	done   chan struct{}
}

func (sc *sidecar) Stop() {
	sc.cancel()
	<-sc.done
}

// kubeCluster couples a lab cluster with a real kube-apiserver in which
// every lab node exists as a Node.
type kubeCluster struct {
	*labCluster
	api      *testapiserver.Server
	admin    kubernetes.Interface
	cfgPath  string
	sidecars map[string]*sidecar
}

func startKubeCluster(t *testing.T, clusterYAML string, specs []nodeSpec) *kubeCluster {
	t.Helper()
	api := testapiserver.Start(t)
	lc := startCluster(t, clusterYAML, specs)
	kc := &kubeCluster{labCluster: lc, api: api, admin: kubernetes.NewForConfigOrDie(api.AdminConfig()), sidecars: map[string]*sidecar{}}
	kc.cfgPath = filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(kc.cfgPath, []byte(clusterYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{render.Namespace, v1alpha1.DefaultRouterNamespace} {
		if _, err := kc.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// No controller-manager runs: create the ServiceAccount pods need.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if _, err := kc.admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return kc
}

// deploy applies everything `vipctl render` writes to DIR/manifests/ and
// runs the allocator with its ServiceAccount's token.
func (kc *kubeCluster) deploy(t *testing.T) {
	t.Helper()
	objs, err := manifests.Objects(kc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	applyObjects(t, kc.api.AdminConfig(), objs)
	allocatorFor(t, kc.api, kc.admin).startAllocator(t, "allocator-0")
}

// grantNodeReaders applies the rendered node RBAC, as an administrator
// would with `oc apply -f out/manifests/`.
func (kc *kubeCluster) grantNodeReaders(t *testing.T) {
	t.Helper()
	applyObjects(t, kc.api.AdminConfig(), manifests.NodeReaders(kc.cfg))
}

// applyObjects creates typed objects (TypeMeta set, as pkg/manifests
// builds them) as `oc apply` would, through the dynamic client.
func applyObjects(t testing.TB, cfg *rest.Config, objs []runtime.Object) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: u}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// addNode creates the Node object of a lab node.
func (kc *kubeCluster) addNode(t *testing.T, name string) {
	t.Helper()
	var spec cluster.Node
	for _, n := range kc.state.Nodes {
		if n.Name == name {
			spec = n
		}
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.ControlPlane {
		labels["node-role.kubernetes.io/control-plane"] = ""
	} else {
		labels["node-role.kubernetes.io/worker"] = ""
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, a := range spec.Addresses {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	created, err := kc.admin.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Addresses live in status, which create ignores.
	created.Status.Addresses = node.Status.Addresses
	if _, err := kc.admin.CoreV1().Nodes().UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startSidecar runs the node's sidecar with the node's own client
// certificate (system:node:<name>, group system:nodes).
func (kc *kubeCluster) startSidecar(t *testing.T, name string) *sidecar {
	t.Helper()
	n := kc.byName[name]
	n.stopLocal() // the sidecar keeps the VIPs local from now on
	h, err := netns.GetFromName(n.host.NS)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close(); _ = h.Close() })
	buf := &syncBuffer{}
	m := runtimecfg.NewMetrics(nil)
	s, err := runtimecfg.NewSidecar(runtimecfg.SidecarOptions{
		OnceOptions: runtimecfg.OnceOptions{Target: n.target, Config: kc.cfgPath, NodeName: name},
		Client:      kubernetes.NewForConfigOrDie(kc.api.NodeConfig(t, name)),
		Debounce:    100 * time.Millisecond,
		Addresses:   func() ([]netip.Addr, error) { return runtimecfg.HandleAddresses(nl) },
		Interface:   func(n netip.Prefix) (string, error) { return runtimecfg.LocalInterface(nl, n) },
		Log:         slog.New(slog.NewTextHandler(buf, nil)),
		Metrics:     m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &sidecar{s: s, m: m, log: buf, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("sidecar %s: %v", name, err)
		}
	}()
	kc.sidecars[name] = sc
	t.Cleanup(func() {
		sc.Stop()
		if t.Failed() {
			t.Logf("--- sidecar %s log:\n%s", name, lastLines(buf.String(), 30))
		}
	})
	return sc
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (kc *kubeCluster) keepalivedConf(t *testing.T, node string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kc.byName[node].target.Root, render.KeepalivedConfPath))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitConf waits until cond holds for node's keepalived.conf.
func (kc *kubeCluster) waitConf(t *testing.T, node, what string, cond func(string) bool) {
	t.Helper()
	var last string
	ok := waitUntil(30*time.Second, func() bool { last = kc.keepalivedConf(t, node); return cond(last) })
	if !ok {
		t.Fatalf("%s: keepalived.conf never showed %s; last:\n%s", node, what, last)
	}
}

func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

func peerLine(addr string) string { return "\n        " + addr + "\n" }

const sidecarPools = `  ingress:
    - name: default
      vips: [198.51.100.6]
  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      nodeSelector: {pool: web}
`

func sidecarSpecs() []nodeSpec {
	return []nodeSpec{
		{name: "master-0", addr: "198.51.100.11/24", controlPlane: true},
		{name: "master-1", addr: "198.51.100.12/24", controlPlane: true},
		{name: "worker-0", addr: "198.51.100.21/24", labels: map[string]string{"pool": "web"}},
		{name: "worker-1", addr: "198.51.100.22/24", labels: map[string]string{"pool": "web"}},
	}
}

// TestSidecarFollowsTheCluster runs every node's sidecar against a real
// kube-apiserver, with node credentials and the rendered RBAC only:
// Nodes coming and going change every node's peers, router pods steer the
// ingress VIP, a Service's address reaches keepalived.conf and answers from
// the client namespace, each node publishes the VIPs it holds, a broken
// ConfigMap keeps the last good config, and an apiserver restart is
// survived.
func TestSidecarFollowsTheCluster(t *testing.T) {
	kc := startKubeCluster(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.deploy(t)
	for _, n := range []string{"master-0", "master-1", "worker-0"} {
		kc.addNode(t, n)
	}
	for _, n := range kc.nodes {
		kc.startSidecar(t, n.name)
	}
	ctx := context.Background()

	// worker-1 has no Node object yet: nobody peers with it.
	kc.waitConf(t, "master-0", "worker-1 gone from the peers", func(c string) bool {
		return !strings.Contains(c, peerLine("198.51.100.22")) && strings.Contains(c, peerLine("198.51.100.21"))
	})
	kc.addNode(t, "worker-1")
	for _, n := range []string{"master-0", "master-1", "worker-0"} {
		kc.waitConf(t, n, "worker-1 among the peers", func(c string) bool { return strings.Contains(c, peerLine("198.51.100.22")) })
	}

	// Routers of the default IngressController on the two workers: the
	// masters leave the ingress instance, the workers' track files say
	// ready.
	for _, w := range []string{"worker-0", "worker-1"} {
		createRouterPod(t, kc.admin, w, true)
	}
	kc.waitConf(t, "master-0", "no ingress instance on a node without a router", func(c string) bool {
		return !strings.Contains(c, "198.51.100.6/32")
	})
	kc.waitConf(t, "worker-0", "the ingress instance", func(c string) bool { return strings.Contains(c, "198.51.100.6/32") })
	waitFile(t, filepath.Join(kc.byName["worker-0"].target.Root, render.IngressStatusFile("default")), "0\n")
	// The router goes unready: the node's status file says so (keepalived
	// then lets the VIP go).
	setPodReady(t, kc.admin, "router-default-worker-0", false)
	waitFile(t, filepath.Join(kc.byName["worker-0"].target.Root, render.IngressStatusFile("default")), "1\n")
	setPodReady(t, kc.admin, "router-default-worker-0", true)
	waitFile(t, filepath.Join(kc.byName["worker-0"].target.Root, render.IngressStatusFile("default")), "0\n")

	// A Service created in the API gets an address from the allocator,
	// which reaches the pool nodes' keepalived and answers from the
	// client.
	createLBService(t, kc.admin, "web", "")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.waitConf(t, w, "the service VIP", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
		startEcho(t, kc.byName[w], "0.0.0.0:8080")
	}
	if c := kc.keepalivedConf(t, "master-0"); strings.Contains(c, "198.51.100.128/") {
		t.Errorf("master-0 is outside the pool's nodeSelector but renders its VIP")
	}
	p := kc.poll("http://198.51.100.128:8080/", 20*time.Millisecond)
	waitFor(t, 30*time.Second, "the service VIP answers from the client", func() bool { ok, _ := p.counts(); return ok > 5 })
	p.Stop()

	// Each node publishes what it holds; the API VIP's holder says so.
	holder := kc.settled(apiVIP)
	waitFor(t, 15*time.Second, holder+" publishes the API VIP", func() bool {
		n, err := kc.admin.CoreV1().Nodes().Get(ctx, holder, metav1.GetOptions{})
		if err != nil {
			return false
		}
		held, err := v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs])
		return err == nil && len(held) > 0 && containsVIP(held, apiVIP, v1alpha1.KeyAPI)
	})
	// Status, the annotations, vr-ids and the docs name every instance
	// alike: a pool address by the instance that carries it. (No router
	// answers health checks here, so the ingress VIP has no holder; its
	// row is still checked against vr-ids and the docs.)
	web := netip.MustParseAddr("198.51.100.128")
	kc.wantKeysAgree(t, map[string]v1alpha1.InstanceKey{
		apiVIP:       v1alpha1.KeyAPI,
		web.String(): cluster.Compile(kc.cfg).Pool("web").Key(web),
	})

	// VIP:6443 is redirected (nftables, installed by the sidecars) to
	// haproxy, which balances: with the holder's own apiserver gone the
	// VIP still answers, from the other master.
	other := "master-0"
	if holder == other {
		other = "master-1"
	}
	kc.byName[holder].apiserver.ready.Store(false)
	kc.byName[holder].apiserver.Close()
	p = kc.poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
	waitFor(t, 20*time.Second, "VIP:6443 answered by "+other+" through haproxy", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.lastBody == other
	})
	p.Stop()

	// A broken ConfigMap: every file stays as it was, the metric says why.
	before := kc.keepalivedConf(t, "worker-0")
	cm, err := kc.admin.CoreV1().ConfigMaps(render.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[v1alpha1.ConfigMapKey] = "apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\nspec: {servicePools: [{name: web, addresses: [198.51.100.0/33]}]}\n"
	if cm, err = kc.admin.CoreV1().ConfigMaps(render.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w0 := kc.sidecars["worker-0"]
	waitFor(t, 15*time.Second, "config_invalid=1", func() bool { return testutil.ToFloat64(w0.m.ConfigInvalid) == 1 })
	if got := kc.keepalivedConf(t, "worker-0"); got != before {
		t.Errorf("an invalid ConfigMap changed keepalived.conf")
	}
	if !strings.Contains(w0.log.String(), "198.51.100.0/33") {
		t.Errorf("the sidecar log does not name the bad value")
	}
	waitFor(t, 15*time.Second, "a ConfigKept Event on worker-0", func() bool {
		evs, err := kc.admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=worker-0,reason=ConfigKept"})
		for _, ev := range evs.Items {
			if err == nil && strings.Contains(ev.Message, "198.51.100.0/33") {
				return true
			}
		}
		return false
	})
	// The ConfigMap fixed, with a second pool range: it takes effect.
	fixed := strings.Replace(clusterYAML("fast", "unicast", sidecarPools), "[198.51.100.128/26]", "[198.51.100.128/26, 198.51.100.200-198.51.100.210]", 1)
	cm.Data[v1alpha1.ConfigMapKey] = fixed
	if _, err := kc.admin.CoreV1().ConfigMaps(render.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "config_invalid=0", func() bool { return testutil.ToFloat64(w0.m.ConfigInvalid) == 0 })
	createLBService(t, kc.admin, "web2", "198.51.100.201")
	kc.waitConf(t, "worker-1", "an address of the ConfigMap's new range", func(c string) bool { return strings.Contains(c, "198.51.100.201/32") })

	// The apiserver restarts; the allocator and the sidecars reconnect
	// and follow a change made after it.
	kc.api.RestartAPIServer(t, nil)
	web2, err := kc.admin.CoreV1().Services("default").Get(ctx, "web2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web2.Annotations[v1alpha1.AnnotationLoadBalancerIPs] = "198.51.100.205"
	if _, err := kc.admin.CoreV1().Services("default").Update(ctx, web2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.waitConf(t, "worker-0", "the address asked for after the restart", func(c string) bool {
		return strings.Contains(c, "198.51.100.205/32") && !strings.Contains(c, "198.51.100.201/32")
	})
	for name, sc := range kc.sidecars {
		if err := sc.s.Ready(); err != nil {
			t.Errorf("%s not ready after the restart: %v", name, err)
		}
	}

	// A Node deleted: its peer drops it. worker-0 is then the only node
	// left for the pool and the ingress instances, which it leaves out
	// (and counts) instead of failing its whole config.
	if err := kc.admin.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.waitConf(t, "worker-0", "worker-1 gone from the peers", func(c string) bool { return !strings.Contains(c, peerLine("198.51.100.22")) })
	if got := testutil.ToFloat64(w0.m.Lonely); got < 1 {
		t.Errorf("instances_without_peer on worker-0 = %v, want the pool's and ingress's", got)
	}
	if c := kc.keepalivedConf(t, "master-0"); !strings.Contains(c, "vrrp_instance api_v4") {
		t.Errorf("master-0 lost its API instance when a worker went away")
	}

	// A planned stop: keepalived's preStop writes the drain file. The
	// holder's sidecar sees it at once and keeps the VIPs it holds local
	// until the undrain, so a connection opened on the holder is still
	// answered after the move (the new holder's handover table, also the
	// sidecars' work, sends its segments back). Undrained, the node's
	// priority is back and it preempts the interim holder, which had no
	// warning, yet a connection opened on it is answered after the return.
	holder = kc.settled(apiVIP)
	kept := kc.openKept(t, "https://"+apiVIP+":6443/")
	drainFile := filepath.Join(kc.byName[holder].target.Root, render.DrainFile)
	if err := os.WriteFile(drainFile, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	interim := kc.waitHolder(apiVIP, 15*time.Second, func(n string) bool { return n != holder })
	time.Sleep(500 * time.Millisecond)
	kept.wantAnsweredOver(t, fmt.Sprintf("drain %s -> %s: a connection opened on the old holder", holder, interim))
	if got := string(kc.byName[holder].host.MustExec("ip", "route", "show", "table", "local", "proto", "118")); !strings.Contains(got, apiVIP) {
		t.Errorf("drained %s keeps local routes %q, want one for %s", holder, got, apiVIP)
	}
	kept = kc.openKept(t, "https://"+apiVIP+":6443/")
	if err := os.WriteFile(drainFile, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kc.waitHolder(apiVIP, 15*time.Second, func(n string) bool { return n == holder })
	time.Sleep(500 * time.Millisecond)
	kept.wantAnsweredOver(t, fmt.Sprintf("%s took the VIP back from %s: a connection opened on %s", holder, interim, interim))
}

func setPodReady(t *testing.T, c kubernetes.Interface, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(v1alpha1.DefaultRouterNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if _, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSidecarWithoutRBACKeepsFiles: without the rendered node RBAC the
// sidecar cannot read the vipctl ConfigMap or router pods; it says which
// permission is missing, stays unready and leaves the files alone, then
// recovers once the RBAC is applied. The node identity still cannot write
// what only the allocator may.
func TestSidecarWithoutRBACKeepsFiles(t *testing.T) {
	kc := startKubeCluster(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	for _, n := range kc.nodes {
		kc.addNode(t, n.name)
	}
	before := kc.keepalivedConf(t, "worker-0")
	sc := kc.startSidecar(t, "worker-0")
	waitFor(t, 20*time.Second, "a log naming the missing permission", func() bool {
		l := sc.log.String()
		// One grant of the rendered RBAC each: without any of them the
		// sidecar cannot render.
		for _, r := range []string{"nodes", "configmaps", "pods", "endpointslices"} {
			if !strings.Contains(l, `cannot list resource \"`+r+`\"`) {
				return false
			}
		}
		return strings.Contains(l, "permission missing")
	})
	if sc.s.Ready() == nil {
		t.Errorf("ready without being able to read the cluster")
	}
	if got := kc.keepalivedConf(t, "worker-0"); got != before {
		t.Errorf("keepalived.conf changed while the cluster could not be read")
	}
	kc.grantNodeReaders(t)
	waitFor(t, 60*time.Second, "ready once the RBAC is applied", func() bool { return sc.s.Ready() == nil })

	// Nothing broader: the node identity cannot write Service status,
	// ConfigMaps, or another node's annotations.
	asNode := kubernetes.NewForConfigOrDie(kc.api.NodeConfig(t, "worker-0"))
	ctx := context.Background()
	svc := createLBService(t, kc.admin, "web", "")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.140"}}
	if _, err := asNode.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node wrote Service status: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: render.Namespace}}
	if _, err := asNode.CoreV1().ConfigMaps(render.Namespace).Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node created the vipctl ConfigMap: %v", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"vipctl.io/vips":"[]"}}}`)
	if _, err := asNode.CoreV1().Nodes().Patch(ctx, "worker-1", "application/merge-patch+json", patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node annotated another node: %v", err)
	}
	if _, err := asNode.CoreV1().Secrets(render.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node listed secrets: %v", err)
	}
}

func containsVIP(h v1alpha1.HeldVIPs, addr string, instance v1alpha1.InstanceKey) bool {
	for _, v := range h {
		if v.Address == addr && v.Instance == instance {
			return true
		}
	}
	return false
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	var got []byte
	if !waitUntil(15*time.Second, func() bool { got, _ = os.ReadFile(path); return string(got) == want }) {
		t.Fatalf("%s: %q, want %q", path, got, want)
	}
}

// createRouterPod creates a router pod of the default IngressController
// bound to node, and sets its readiness as the kubelet would.
func createRouterPod(t *testing.T, c kubernetes.Interface, node string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "router-default-" + node, Namespace: v1alpha1.DefaultRouterNamespace,
			Labels: map[string]string{v1alpha1.RouterDeploymentLabel: "default"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "router", Image: "router"}}},
	}
	created, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createLBService creates a LoadBalancer Service asking for ip (if set)
// through the vipctl.io/load-balancer-ips annotation.
func createLBService(t *testing.T, c kubernetes.Interface, name, ip string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080}}},
	}
	if ip != "" {
		svc.Annotations[v1alpha1.AnnotationLoadBalancerIPs] = ip
	}
	created, err := c.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// setLBStatus writes addresses into a Service's status as the allocator
// would, for tests that run no allocator.
func setLBStatus(t *testing.T, c kubernetes.Interface, name string, ips ...string) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	svc, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	out, err := c.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("service %s status: %w", name, err))
	}
	return out
}

// TestSidecarLocalTrafficPolicy: a Service with externalTrafficPolicy Local
// gets a VRRP instance of its own whose VIP sits only on a node with a
// ready endpoint, and follows the endpoint when it moves.
func TestSidecarLocalTrafficPolicy(t *testing.T) {
	kc := startKubeCluster(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.grantNodeReaders(t)
	for _, n := range kc.nodes {
		kc.addNode(t, n.name)
		kc.startSidecar(t, n.name)
	}
	ctx := context.Background()
	svc := createLBService(t, kc.admin, "local", "")
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if _, err := kc.admin.CoreV1().Services(svc.Namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const vip = "198.51.100.150"
	setLBStatus(t, kc.admin, svc.Name, vip)
	setEndpoints(t, kc.admin, svc.Name, map[string]bool{"worker-1": true, "worker-0": false})
	holder := kc.waitHolder(vip, 30*time.Second, func(string) bool { return true })
	if holder != "worker-1" {
		t.Fatalf("%s held by %s; want worker-1, the only node with a ready endpoint", vip, holder)
	}
	kc.wantKeysAgree(t, map[string]v1alpha1.InstanceKey{vip: v1alpha1.ServiceKey("default/local")})
	// worker-0 takes part (an instance needs a peer) but its status file
	// keeps it in FAULT.
	if c := kc.keepalivedConf(t, "worker-0"); !strings.Contains(c, vip+"/32") {
		t.Errorf("worker-0 does not render the Local Service's instance")
	}
	if c := kc.keepalivedConf(t, "master-0"); strings.Contains(c, vip+"/32") {
		t.Errorf("master-0 (outside the pool) renders the Local Service's instance")
	}
	waitFile(t, filepath.Join(kc.byName["worker-0"].target.Root, render.LocalServiceStatusFile("default/local")), "1\n")

	// The endpoint moves to worker-0: so does the VIP, and worker-1 lets
	// go of it.
	setEndpoints(t, kc.admin, svc.Name, map[string]bool{"worker-1": false, "worker-0": true})
	kc.waitHolder(vip, 30*time.Second, func(h string) bool { return h == "worker-0" })
	time.Sleep(2 * time.Second)
	if got := kc.holders(vip); len(got) != 1 || got[0] != "worker-0" {
		t.Errorf("%s held by %v after the endpoint moved; want only worker-0", vip, got)
	}

	// The Service goes: its instance leaves every node, and so do the
	// status files keepalived tracked for it.
	if err := kc.admin.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, vip+" held by no node", func() bool { return len(kc.holders(vip)) == 0 })
	for _, n := range []string{"worker-0", "worker-1"} {
		f := filepath.Join(kc.byName[n].target.Root, render.LocalServiceStatusFile("default/local"))
		waitFor(t, 30*time.Second, n+" removing the deleted Service's status file", func() bool {
			_, err := os.Stat(f)
			return os.IsNotExist(err)
		})
		if c := kc.keepalivedConf(t, n); strings.Contains(c, vip+"/32") {
			t.Errorf("%s still renders the deleted Service's instance", n)
		}
	}
}

// setEndpoints writes the Service's EndpointSlice as the EndpointSlice
// controller would: one endpoint per node, ready or not.
func setEndpoints(t *testing.T, c kubernetes.Interface, svc string, nodes map[string]bool) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: metav1.NamespaceDefault, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	i := 0
	for _, n := range []string{"master-0", "master-1", "worker-0", "worker-1"} {
		ready, ok := nodes[n]
		if !ok {
			continue
		}
		i++
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("203.0.113.%d", 10+i)},
			NodeName:   &n,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	cur, err := c.DiscoveryV1().EndpointSlices(es.Namespace).Get(ctx, es.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{})
	} else if err == nil {
		cur.Endpoints = es.Endpoints
		_, err = c.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}
