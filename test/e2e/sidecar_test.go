package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
)

// hasPeer tells whether a keepalived.conf lists addr as a unicast peer (a
// line of its own, with or without per-peer options such as min_ttl).
func hasPeer(conf, addr string) bool {
	return regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(addr) + `( .*)?$`).MatchString(conf)
}

const sidecarPools = `  ingress:
    - name: default
      vips: [198.51.100.6]
  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      nodeSelector: {pool: web}
`

func sidecarSpecs() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true},
		{Name: "master-1", Addr: "198.51.100.12/24", ControlPlane: true},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}},
		{Name: "worker-1", Addr: "198.51.100.22/24", Labels: map[string]string{"pool": "web"}},
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
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	// The ClusterVIPs object of the same file: the allocator's leader
	// writes its status from what the sidecars publish.
	lab.CreateClusterVIPs(t, kc.API.AdminConfig(), clusterYAML("fast", "unicast", sidecarPools))
	kc.Deploy(t)
	for _, n := range []string{"master-0", "master-1", "worker-0"} {
		kc.AddNode(t, n)
	}
	for _, n := range kc.Nodes {
		kc.StartSidecar(t, n.Name)
	}
	ctx := context.Background()

	// worker-1 has no Node object yet: nobody peers with it.
	kc.WaitConf(t, "master-0", "worker-1 gone from the peers", func(c string) bool {
		return !hasPeer(c, "198.51.100.22") && hasPeer(c, "198.51.100.21")
	})
	kc.AddNode(t, "worker-1")
	for _, n := range []string{"master-0", "master-1", "worker-0"} {
		kc.WaitConf(t, n, "worker-1 among the peers", func(c string) bool { return hasPeer(c, "198.51.100.22") })
	}

	// Routers of the default IngressController on the two workers: the
	// masters leave the ingress instance, the workers' track files say
	// ready.
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.CreateRouterPod(t, w, true)
	}
	kc.WaitConf(t, "master-0", "no ingress instance on a node without a router", func(c string) bool {
		return !strings.Contains(c, "198.51.100.6/32")
	})
	kc.WaitConf(t, "worker-0", "the ingress instance", func(c string) bool { return strings.Contains(c, "198.51.100.6/32") })
	waitFile(t, filepath.Join(kc.ByName["worker-0"].Target.Root, onnode.IngressStatusFile("default")), "0\n")
	// The router goes unready: the node's status file says so (keepalived
	// then lets the VIP go).
	kc.SetPodReady(t, "router-default-worker-0", false)
	waitFile(t, filepath.Join(kc.ByName["worker-0"].Target.Root, onnode.IngressStatusFile("default")), "1\n")
	kc.SetPodReady(t, "router-default-worker-0", true)
	waitFile(t, filepath.Join(kc.ByName["worker-0"].Target.Root, onnode.IngressStatusFile("default")), "0\n")

	// A Service created in the API gets an address from the allocator,
	// which reaches the pool nodes' keepalived and answers from the
	// client.
	kc.CreateLBService(t, "web", "")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the service VIP", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}
	if c := kc.KeepalivedConf(t, "master-0"); strings.Contains(c, "198.51.100.128/") {
		t.Errorf("master-0 is outside the pool's nodeSelector but renders its VIP")
	}
	p := kc.Poll("http://198.51.100.128:8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the service VIP answers from the client", func() bool { ok, _ := p.Counts(); return ok > 5 })
	p.Stop()

	// Each node publishes what it holds; the API VIP's holder says so.
	holder := kc.Settled(apiVIP)
	lab.WaitFor(t, 15*time.Second, holder+" publishes the API VIP", func() bool {
		n, err := kc.Admin.CoreV1().Nodes().Get(ctx, holder, metav1.GetOptions{})
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
	wantKeysAgree(t, kc, map[string]v1alpha1.InstanceKey{
		apiVIP:       v1alpha1.KeyAPI,
		web.String(): cluster.Compile(kc.Config).Pool("web").Key(web),
	})
	// The object's status says the same, and every sidecar runs the
	// object's spec: what it applied (from the ConfigMap and its file)
	// has the digest of the object the apiserver defaulted.
	admin := kc.API.AdminConfig()
	st := waitStatus(t, admin, "the API VIP's holder and 4 nodes on the object's spec", func(s crd.ClusterVIPsStatus) bool {
		return lab.StatusHolder(s, apiVIP) == holder && len(s.Nodes) == 4 &&
			!slices.ContainsFunc(s.Nodes, func(n crd.NodeStatus) bool { return n.SpecDigest != s.SpecDigest || n.ObservedGeneration != 1 })
	})
	if st.Pools[0].InUse != 1 {
		t.Errorf("pool web: %+v, want 1 address in use", st.Pools[0])
	}

	// VIP:6443 is redirected (nftables, installed by the sidecars) to
	// haproxy, which balances: with the holder's own apiserver gone the
	// VIP still answers, from the other master.
	other := "master-0"
	if holder == other {
		other = "master-1"
	}
	kc.ByName[holder].APIServer.SetReady(false)
	kc.ByName[holder].APIServer.Close()
	p = kc.Poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
	lab.WaitFor(t, 20*time.Second, "VIP:6443 answered by "+other+" through haproxy", func() bool {
		return p.LastBody() == other
	})
	p.Stop()

	// A broken ConfigMap: every file stays as it was, the metric says why.
	before := kc.KeepalivedConf(t, "worker-0")
	cm, err := kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[v1alpha1.ConfigMapKey] = "apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\nspec: {servicePools: [{name: web, addresses: [198.51.100.0/33]}]}\n"
	if cm, err = kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w0 := kc.Sidecars["worker-0"]
	lab.WaitFor(t, 15*time.Second, "config_invalid=1", func() bool { return testutil.ToFloat64(w0.Metrics.ConfigInvalid) == 1 })
	if got := kc.KeepalivedConf(t, "worker-0"); got != before {
		t.Errorf("an invalid ConfigMap changed keepalived.conf")
	}
	if !strings.Contains(w0.Log.String(), "198.51.100.0/33") {
		t.Errorf("the sidecar log does not name the bad value")
	}
	lab.WaitFor(t, 15*time.Second, "a ConfigKept Event on worker-0", func() bool {
		evs, err := kc.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=worker-0,reason=ConfigKept"})
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
	if _, err := kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 15*time.Second, "config_invalid=0", func() bool { return testutil.ToFloat64(w0.Metrics.ConfigInvalid) == 0 })
	kc.CreateLBService(t, "web2", "198.51.100.201")
	kc.WaitConf(t, "worker-1", "an address of the ConfigMap's new range", func(c string) bool { return strings.Contains(c, "198.51.100.201/32") })
	// The sidecars now run the ConfigMap's spec, which the object does
	// not say: its status says so.
	waitStatus(t, admin, "every node off the object's spec", func(s crd.ClusterVIPsStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, crd.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && len(s.Nodes) == 4 &&
			!slices.ContainsFunc(s.Nodes, func(n crd.NodeStatus) bool { return n.SpecDigest == s.SpecDigest })
	})

	// The apiserver restarts; the allocator and the sidecars reconnect
	// and follow a change made after it.
	kc.API.RestartAPIServer(t, nil)
	web2, err := kc.Admin.CoreV1().Services("default").Get(ctx, "web2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web2.Annotations[v1alpha1.AnnotationLoadBalancerIPs] = "198.51.100.205"
	if _, err := kc.Admin.CoreV1().Services("default").Update(ctx, web2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.WaitConf(t, "worker-0", "the address asked for after the restart", func(c string) bool {
		return strings.Contains(c, "198.51.100.205/32") && !strings.Contains(c, "198.51.100.201/32")
	})
	for name, sc := range kc.Sidecars {
		if err := sc.Ready(); err != nil {
			t.Errorf("%s not ready after the restart: %v", name, err)
		}
	}

	// A Node deleted: its peer drops it. worker-0 is then the only node
	// left for the pool and the ingress instances, which it leaves out
	// (and counts) instead of failing its whole config.
	if err := kc.Admin.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.WaitConf(t, "worker-0", "worker-1 gone from the peers", func(c string) bool { return !hasPeer(c, "198.51.100.22") })
	// The metric is set once the sync that wrote the file returns.
	lab.WaitFor(t, 5*time.Second, "instances_without_peer on worker-0 counting the pool's and ingress's", func() bool {
		return testutil.ToFloat64(w0.Metrics.Lonely) >= 1
	})
	if c := kc.KeepalivedConf(t, "master-0"); !strings.Contains(c, "vrrp_instance api_v4") {
		t.Errorf("master-0 lost its API instance when a worker went away")
	}

	// A planned stop: keepalived's preStop writes the drain file. The
	// holder's sidecar sees it at once and keeps the VIPs it holds local
	// until the undrain, so a connection opened on the holder is still
	// answered after the move (the new holder's handover table, also the
	// sidecars' work, sends its segments back). Undrained, the node's
	// priority is back and it preempts the interim holder, which had no
	// warning, yet a connection opened on it is answered after the return.
	holder = kc.Settled(apiVIP)
	kept := kc.OpenKept(t, "https://"+apiVIP+":6443/")
	drainFile := filepath.Join(kc.ByName[holder].Target.Root, onnode.DrainFile)
	if err := os.WriteFile(drainFile, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	interim := kc.WaitHolder(apiVIP, 15*time.Second, func(n string) bool { return n != holder })
	moved := time.Now()
	waitStatus(t, admin, "the status naming "+interim, func(s crd.ClusterVIPsStatus) bool { return lab.StatusHolder(s, apiVIP) == interim })
	t.Logf("drain %s -> %s: the ClusterVIPs status named the new holder %v after the lab saw the VIP on it", holder, interim, time.Since(moved).Round(10*time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	kept.WantAnsweredOver(t, fmt.Sprintf("drain %s -> %s: a connection opened on the old holder", holder, interim))
	if got := string(kc.ByName[holder].Host.MustExec("ip", "route", "show", "table", "local", "proto", "118")); !strings.Contains(got, apiVIP) {
		t.Errorf("drained %s keeps local routes %q, want one for %s", holder, got, apiVIP)
	}
	kept = kc.OpenKept(t, "https://"+apiVIP+":6443/")
	if err := os.WriteFile(drainFile, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kc.WaitHolder(apiVIP, 15*time.Second, func(n string) bool { return n == holder })
	time.Sleep(500 * time.Millisecond)
	kept.WantAnsweredOver(t, fmt.Sprintf("%s took the VIP back from %s: a connection opened on %s", holder, interim, interim))
}

// TestSidecarWithoutRBACKeepsFiles: without the rendered node RBAC the
// sidecar cannot read the vipctl ConfigMap or router pods; it says which
// permission is missing, stays unready and leaves the files alone, then
// recovers once the RBAC is applied. The node identity still cannot write
// what only the allocator may.
func TestSidecarWithoutRBACKeepsFiles(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
	}
	before := kc.KeepalivedConf(t, "worker-0")
	sc := kc.StartSidecar(t, "worker-0")
	lab.WaitFor(t, 20*time.Second, "a log naming the missing permission", func() bool {
		l := sc.Log.String()
		// One grant of the rendered RBAC each: without any of them the
		// sidecar cannot render.
		for _, r := range []string{"nodes", "configmaps", "pods", "endpointslices"} {
			if !strings.Contains(l, `cannot list resource \"`+r+`\"`) {
				return false
			}
		}
		return strings.Contains(l, "permission missing")
	})
	if sc.Ready() == nil {
		t.Errorf("ready without being able to read the cluster")
	}
	if got := kc.KeepalivedConf(t, "worker-0"); got != before {
		t.Errorf("keepalived.conf changed while the cluster could not be read")
	}
	kc.GrantNodeReaders(t)
	lab.WaitFor(t, 60*time.Second, "ready once the RBAC is applied", func() bool { return sc.Ready() == nil })

	// Nothing broader: the node identity cannot write Service status,
	// ConfigMaps, or another node's annotations.
	asNode := kubernetes.NewForConfigOrDie(kc.API.NodeConfig(t, "worker-0"))
	ctx := context.Background()
	svc := kc.CreateLBService(t, "web", "")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.140"}}
	if _, err := asNode.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node wrote Service status: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: onnode.Namespace}}
	if _, err := asNode.CoreV1().ConfigMaps(onnode.Namespace).Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node created the vipctl ConfigMap: %v", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"vipctl.io/vips":"[]"}}}`)
	if _, err := asNode.CoreV1().Nodes().Patch(ctx, "worker-1", "application/merge-patch+json", patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node annotated another node: %v", err)
	}
	if _, err := asNode.CoreV1().Secrets(onnode.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
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
	if !lab.WaitUntil(15*time.Second, func() bool { got, _ = os.ReadFile(path); return string(got) == want }) {
		t.Fatalf("%s: %q, want %q", path, got, want)
	}
}

// TestSidecarLocalTrafficPolicy: a Service with externalTrafficPolicy Local
// gets a VRRP instance of its own whose VIP sits only on a node with a
// ready endpoint, and follows the endpoint when it moves.
func TestSidecarLocalTrafficPolicy(t *testing.T) {
	const vip = "198.51.100.150"
	kc, svc := startLocalService(t, "local", vip)
	ctx := context.Background()
	setEndpoints(t, kc.Admin, svc.Name, map[string]bool{"worker-1": true, "worker-0": false})
	holder := kc.WaitHolder(vip, 30*time.Second, func(string) bool { return true })
	if holder != "worker-1" {
		t.Fatalf("%s held by %s; want worker-1, the only node with a ready endpoint", vip, holder)
	}
	wantKeysAgree(t, kc, map[string]v1alpha1.InstanceKey{vip: v1alpha1.ServiceKey("default/local")})
	// worker-0 takes part (an instance needs a peer) but its status file
	// keeps it in FAULT.
	if c := kc.KeepalivedConf(t, "worker-0"); !strings.Contains(c, vip+"/32") {
		t.Errorf("worker-0 does not render the Local Service's instance")
	}
	if c := kc.KeepalivedConf(t, "master-0"); strings.Contains(c, vip+"/32") {
		t.Errorf("master-0 (outside the pool) renders the Local Service's instance")
	}
	waitFile(t, filepath.Join(kc.ByName["worker-0"].Target.Root, onnode.LocalServiceStatusFile("default/local")), "-254\n")

	// The endpoint moves to worker-0: so does the VIP, and worker-1 lets
	// go of it.
	setEndpoints(t, kc.Admin, svc.Name, map[string]bool{"worker-1": false, "worker-0": true})
	kc.WaitHolder(vip, 30*time.Second, func(h string) bool { return h == "worker-0" })
	time.Sleep(2 * time.Second)
	if got := kc.Holders(vip); len(got) != 1 || got[0] != "worker-0" {
		t.Errorf("%s held by %v after the endpoint moved; want only worker-0", vip, got)
	}

	// The Service goes: its instance leaves every node, and so do the
	// status files keepalived tracked for it.
	if err := kc.Admin.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 30*time.Second, vip+" held by no node", func() bool { return len(kc.Holders(vip)) == 0 })
	for _, n := range []string{"worker-0", "worker-1"} {
		f := filepath.Join(kc.ByName[n].Target.Root, onnode.LocalServiceStatusFile("default/local"))
		lab.WaitFor(t, 30*time.Second, n+" removing the deleted Service's status file", func() bool {
			_, err := os.Stat(f)
			return os.IsNotExist(err)
		})
		if c := kc.KeepalivedConf(t, n); strings.Contains(c, vip+"/32") {
			t.Errorf("%s still renders the deleted Service's instance", n)
		}
	}
}

// TestSidecarLocalEndpointMovesMakeBeforeBreak: a Local Service's only
// endpoint moves to another node whose sidecar is late (stopped, as a
// sidecar seconds behind on a loaded node is): the old holder, its pod
// terminating but still serving, keeps the VIP at priority 1 instead of
// leaving it unheld, and the new node takes it as soon as its sidecar
// says its endpoint is ready. No request fails on the way.
func TestSidecarLocalEndpointMovesMakeBeforeBreak(t *testing.T) {
	const vip = "198.51.100.151"
	kc, svc := startLocalService(t, "mover", vip)
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	draining := discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	setEndpointConditions(t, kc.Admin, svc.Name, map[string]discoveryv1.EndpointConditions{"worker-1": ready})
	if h := kc.WaitHolder(vip, 30*time.Second, func(string) bool { return true }); h != "worker-1" {
		t.Fatalf("%s held by %s; want worker-1, the only node with a ready endpoint", vip, h)
	}
	status := func(node string) string {
		return filepath.Join(kc.ByName[node].Target.Root, onnode.LocalServiceStatusFile("default/mover"))
	}
	// worker-0 pads the instance (a peer is needed), in FAULT.
	waitFile(t, status("worker-0"), "-254\n")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}
	p := kc.Poll("http://"+vip+":8080/", 10*time.Millisecond)

	// The rollout: the new pod on worker-0 is ready, the old one on
	// worker-1 terminating; worker-0's sidecar has not caught up.
	kc.Sidecars["worker-0"].Stop()
	setEndpointConditions(t, kc.Admin, svc.Name, map[string]discoveryv1.EndpointConditions{"worker-0": ready, "worker-1": draining})
	waitFile(t, status("worker-1"), "-253\n")
	// Many Master_Down intervals of the fast profile (~0.4 s), and longer
	// than a node keeps a VIP it gave up local (dataplane.HandoverGrace):
	// in FAULT, worker-1 would have left the VIP to nobody, and the
	// client's requests, still sent to worker-1, would fail by now.
	time.Sleep(dataplane.HandoverGrace + 2*time.Second)
	if h := kc.Holders(vip); !slices.Equal(h, []string{"worker-1"}) {
		t.Errorf("%s held by %v while worker-1's endpoint drains and worker-0's sidecar is behind; want worker-1 still", vip, h)
	}

	// worker-0's sidecar catches up: its ready endpoint outranks the
	// draining one.
	kc.StartSidecar(t, "worker-0")
	waitFile(t, status("worker-0"), "0\n")
	kc.WaitHolder(vip, 30*time.Second, func(h string) bool { return h == "worker-0" })
	lab.WaitFor(t, 30*time.Second, vip+" held by worker-0 alone", func() bool { return slices.Equal(kc.Holders(vip), []string{"worker-0"}) })

	// The old pod is gone: worker-1 is in FAULT again, worker-0 keeps it.
	setEndpointConditions(t, kc.Admin, svc.Name, map[string]discoveryv1.EndpointConditions{"worker-0": ready})
	waitFile(t, status("worker-1"), "-254\n")
	time.Sleep(time.Second)
	if h := kc.Holders(vip); !slices.Equal(h, []string{"worker-0"}) {
		t.Errorf("%s held by %v after the old pod went; want worker-0", vip, h)
	}
	p.WantNoFailures(t, vip+" while its endpoint moved from worker-1 to worker-0")
}

// TestSidecarLocalHolderUnreadyHandsOver: the holder of a Local Service's
// VIP whose pod fails its readiness probe (Running, not ready, not
// terminating) stays a member of the Service's instance in FAULT, so that
// no node's keepalived.conf changes and no keepalived reloads (a reload
// restarts a backup's timers: the VIP had no holder for Master_Down,
// the cluster lab's rolling upgrade, 2026-11-29); its priority 0 advert
// hands the VIP to a node with a ready endpoint. Three pool nodes, so
// that leaving would not be hidden by the padding peer a two-node
// instance gets.
func TestSidecarLocalHolderUnreadyHandsOver(t *testing.T) {
	const vip = "198.51.100.152"
	specs := append(sidecarSpecs(), lab.NodeSpec{Name: "worker-2", Addr: "198.51.100.23/24", Labels: map[string]string{"pool": "web"}})
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), specs)
	kc.GrantNodeReaders(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	svc := createLocalService(t, kc, "prober", vip)
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	unready := discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
	workers := []string{"worker-0", "worker-1", "worker-2"}
	all := map[string]discoveryv1.EndpointConditions{}
	for _, w := range workers {
		all[w] = ready
	}
	setEndpointConditions(t, kc.Admin, svc.Name, all)
	status := func(node string) string {
		return filepath.Join(kc.ByName[node].Target.Root, onnode.LocalServiceStatusFile("default/prober"))
	}
	for _, w := range workers {
		waitFile(t, status(w), "0\n")
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}
	holder := kc.WaitHolder(vip, 30*time.Second, func(string) bool { return true })
	before := map[string]string{}
	for _, n := range kc.Nodes {
		before[n.Name] = kc.KeepalivedConf(t, n.Name)
	}
	p := kc.Poll("http://"+vip+":8080/", 10*time.Millisecond)

	all[holder] = unready
	setEndpointConditions(t, kc.Admin, svc.Name, all)
	waitFile(t, status(holder), "-254\n")
	next := kc.WaitHolder(vip, 30*time.Second, func(h string) bool { return h != holder })
	lab.WaitFor(t, 30*time.Second, vip+" held by "+next+" alone", func() bool { return slices.Equal(kc.Holders(vip), []string{next}) })
	for _, n := range kc.Nodes {
		if got := kc.KeepalivedConf(t, n.Name); got != before[n.Name] {
			t.Errorf("%s's keepalived.conf changed when %s's endpoint went unready: its keepalived reloaded", n.Name, holder)
		}
	}
	p.WantNoFailures(t, vip+" while its holder's endpoint went unready")

	// The probe passes again: the node's status file says so, and still
	// nothing reloads.
	all[holder] = ready
	setEndpointConditions(t, kc.Admin, svc.Name, all)
	waitFile(t, status(holder), "0\n")
	for _, n := range kc.Nodes {
		if got := kc.KeepalivedConf(t, n.Name); got != before[n.Name] {
			t.Errorf("%s's keepalived.conf changed when %s's endpoint was ready again", n.Name, holder)
		}
	}
}

// startLocalService starts the sidecar lab, every node with its sidecar,
// and a LoadBalancer Service name with externalTrafficPolicy Local whose
// address is vip.
func startLocalService(t *testing.T, name, vip string) (*lab.KubeCluster, *corev1.Service) {
	t.Helper()
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.GrantNodeReaders(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	return kc, createLocalService(t, kc, name, vip)
}

// createLocalService creates a LoadBalancer Service name with
// externalTrafficPolicy Local whose address is vip.
func createLocalService(t *testing.T, kc *lab.KubeCluster, name, vip string) *corev1.Service {
	t.Helper()
	svc := kc.CreateLBService(t, name, "")
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc, err := kc.Admin.CoreV1().Services(svc.Namespace).Update(context.Background(), svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc.SetLBStatus(t, svc.Name, vip)
	return svc
}

// setEndpoints writes the Service's EndpointSlice as the EndpointSlice
// controller would: one endpoint per node, ready or not.
func setEndpoints(t *testing.T, c kubernetes.Interface, svc string, nodes map[string]bool) {
	t.Helper()
	conds := map[string]discoveryv1.EndpointConditions{}
	for n, ready := range nodes {
		conds[n] = discoveryv1.EndpointConditions{Ready: ptr.To(ready)}
	}
	setEndpointConditions(t, c, svc, conds)
}

// setEndpointConditions writes the Service's EndpointSlice: one endpoint
// per node, with its conditions.
func setEndpointConditions(t *testing.T, c kubernetes.Interface, svc string, nodes map[string]discoveryv1.EndpointConditions) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: metav1.NamespaceDefault, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	i := 0
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		conds := nodes[n]
		i++
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("203.0.113.%d", 10+i)},
			NodeName:   &n,
			Conditions: conds,
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
