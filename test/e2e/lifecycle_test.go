package e2e

import (
	"context"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// Node lifecycle in the lab (docs/operations.md, the rules up top): the
// keepalived pod is started and stopped as the kubelet does it, with the
// init container's real command line, so what a node does after a restart,
// a reboot or joining late is what these tests see.

// writeBootstrapNodes writes the NodeList `vipctl render --nodes` ships as
// /etc/vipctl/nodes.yaml, listing nodes as they are now.
func writeBootstrapNodes(t *testing.T, nodes []cluster.Node) string {
	t.Helper()
	list := corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	for _, n := range nodes {
		labels := map[string]string{}
		for k, v := range n.Labels {
			labels[k] = v
		}
		if n.ControlPlane {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels,
			Annotations: map[string]string{cluster.InterfaceAnnotation: n.Interface}}}
		for _, a := range n.Addresses {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
		}
		list.Items = append(list.Items, node)
	}
	data, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Laid down at install, before any sidecar recorded a view.
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPod starts a node's keepalived pod as the kubelet does: the init
// container (`vipctl runtimecfg --once`, its real command line), and only
// if that exits 0, keepalived and the sidecar. It returns the init
// container's exit code and output; a non-zero code is what the kubelet
// shows as Init:CrashLoopBackOff.
func startPod(t *testing.T, kc *lab.KubeCluster, name, bootstrapNodes string) (int, string) {
	t.Helper()
	n := kc.ByName[name]
	code, out, errOut := vipctl(t, "runtimecfg", "--once", "--config", kc.ConfigPath, "--bootstrap-nodes", bootstrapNodes,
		"--node-name", name, "--root", n.Target.Root, "--netns", n.Target.Netns)
	t.Logf("%s: init container exited %d: %s%s", name, code, out, errOut)
	if code != 0 {
		return code, out + errOut
	}
	n.StartKeepalived()
	if !slices.Contains(kc.Nodes, n) {
		kc.Nodes = append(kc.Nodes, n)
	}
	kc.StartSidecar(t, name)
	return code, out + errOut
}

// stopPod stops a node's keepalived pod as the kubelet does: keepalived's
// preStop writes the drain file and waits while a peer takes the VIPs
// over (three adverts and a second), then the containers stop.
func stopPod(t *testing.T, kc *lab.KubeCluster, name string) {
	t.Helper()
	n := kc.ByName[name]
	if err := os.WriteFile(filepath.Join(n.Target.Root, onnode.DrainFile), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3*kc.Config.Spec.VRRP.Advert() + time.Second)
	kc.Sidecars[name].Stop()
	n.Keepalived.Stop()
}

// TestNewNodeJoinsAfterRender: a node added after `vipctl render` is in
// no bootstrap node list. Its init container still exits 0 (a keepalived
// without instances, which takes nothing from anyone), the sidecar renders
// it from the API once its Node exists, its peers take it in, it serves a
// Service's VIP, and its next restart starts from the last-good view it
// has recorded since.
func TestNewNodeJoinsAfterRender(t *testing.T) {
	specs := sidecarSpecs()
	late := specs[3] // worker-1
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), specs[:3])
	bootstrap := writeBootstrapNodes(t, kc.State.Nodes)
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
		n.StartEcho(t, "0.0.0.0:8080")
	}

	n := kc.NewNode(t, late)
	code, out := startPod(t, kc, late.Name, bootstrap)
	if code != 0 {
		t.Fatalf("the init container of a node added after render exited %d (Init:CrashLoopBackOff): %s", code, out)
	}
	if !strings.Contains(out, "not in") {
		t.Errorf("the init container does not say why it rendered no instance: %s", out)
	}
	if c := kc.KeepalivedConf(t, late.Name); strings.Contains(c, "vrrp_instance") {
		t.Errorf("before its Node exists, %s renders instances:\n%s", late.Name, c)
	}
	n.StartEcho(t, "0.0.0.0:8080")

	kc.AddNode(t, late.Name)
	kc.WaitConf(t, late.Name, "the web pool's instances with worker-0 as peer", func(c string) bool {
		return strings.Contains(c, "vrrp_instance pool_web_0_v4") && hasPeer(c, "198.51.100.21")
	})
	kc.WaitConf(t, "worker-0", late.Name+" among the peers", func(c string) bool { return hasPeer(c, "198.51.100.22") })
	if n.Keepalived.Exited() {
		t.Fatalf("%s: keepalived exited:\n%s", late.Name, n.Keepalived.LogTail(20))
	}

	// A Service on the pool answers, from whichever worker holds it.
	kc.CreateLBService(t, "web", "")
	kc.WaitConf(t, late.Name, "the Service's address", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
	p := kc.Poll("http://198.51.100.128:8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the Service VIP answers", func() bool { ok, _ := p.Counts(); return ok > 5 })
	p.Stop()

	// It has a last-good view now: the next start renders from it, with
	// the Service's address, instead of falling back to no instance.
	lastGood := filepath.Join(n.Target.Root, onnode.LastGoodPath)
	lab.WaitFor(t, 15*time.Second, late.Name+" records the Service's address in its last-good view", func() bool {
		data, err := os.ReadFile(lastGood)
		return err == nil && strings.Contains(string(data), "198.51.100.128")
	})
	stopPod(t, kc, late.Name)
	code, out = startPod(t, kc, late.Name, bootstrap)
	if code != 0 || !strings.Contains(out, onnode.LastGoodPath) {
		t.Fatalf("restart of %s: exit %d, want 0 rendering from %s: %s", late.Name, code, onnode.LastGoodPath, out)
	}
	if c := kc.KeepalivedConf(t, late.Name); !strings.Contains(c, "198.51.100.128/32") {
		t.Errorf("%s restarted without the Service's address:\n%s", late.Name, c)
	}
}

// TestPodRestartKeepsServiceVIPs: the keepalived pod of the node holding a
// Service's VIP restarts while the API is down. Its preStop hands the VIP
// over; the new pod's init container renders from the last-good view, held
// back at the lowest priority, so the node does not take the VIP back
// before its sidecar has synced (on main it preempted at once, with only
// the pool's anchor: the Service's address then answered nowhere until the
// API came back). When the API is back and the sidecar has synced, it
// preempts, make-before-break. Not one request to the VIP fails.
func TestPodRestartKeepsServiceVIPs(t *testing.T) {
	// The sync that wrote the Service's address into keepalived.conf
	// recorded it in the last-good view too, long before the VIP settles.
	kc, vip, holder := startServiceLab(t)
	bootstrap := writeBootstrapNodes(t, kc.State.Nodes)
	p := kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the Service VIP answers", func() bool { ok, _ := p.Counts(); return ok > 5 })

	kc.API.RestartAPIServer(t, func() {
		stopPod(t, kc, holder)
		interim := kc.WaitHolder(vip, 15*time.Second, func(n string) bool { return n != holder })
		t.Logf("%s stopped, %s holds %s", holder, interim, vip)
		if code, out := startPod(t, kc, holder, bootstrap); code != 0 {
			t.Fatalf("init container: %d %s", code, out)
		}
		if c := kc.KeepalivedConf(t, holder); !strings.Contains(c, vip+"/32") || !strings.Contains(c, "priority 1\n") {
			t.Errorf("%s restarted without the Service's address, or not held back:\n%s", holder, c)
		}
		// Many adverts long: a node that preempts does so in three.
		time.Sleep(10 * kc.Config.Spec.VRRP.Advert())
		if got := kc.Holders(vip); len(got) != 1 || got[0] != interim {
			t.Errorf("before its first sync, with the API down, %s took %s: holders %v, want %s", holder, vip, got, interim)
		}
	})
	// The API is back: the sidecar syncs and the preferred node preempts.
	kc.WaitHolder(vip, 30*time.Second, func(n string) bool { return n == holder })
	time.Sleep(time.Second)
	p.WantNoFailures(t, "a pod restart of "+holder+" across an API outage")
}

// machineConfigFile is a file's content in a MachineConfig as the API
// holds it, and whether the MachineConfig carries it.
func machineConfigFile(t *testing.T, kc *lab.KubeCluster, mc, path string) ([]byte, bool) {
	t.Helper()
	data, ok, err := machineconfig.Fetch(context.Background(), dynamic.NewForConfigOrDie(kc.API.AdminConfig()), mc, path)
	if err != nil {
		t.Fatal(err)
	}
	return data, ok
}

// TestUpdateThenReinstallKeepsAPIVIP: `vipctl update` rewrites the
// MachineConfigs (a static change); a control-plane node is then
// reinstalled from them (nothing of vipctl's left on its disk) while the
// apiserver is down. Its init container renders the API instance from the
// bootstrap node list the new MachineConfig carries, and when the other
// control-plane node stops, the API VIP comes up on it and answers. On
// main the rewritten MachineConfigs carried no node list: the node started
// keepalived without instances and the API VIP waited for the API.
func TestUpdateThenReinstallKeepsAPIVIP(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", ""), masters(2))
	kc.API.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	objs, err := manifests.Objects(kc.Config)
	if err != nil {
		t.Fatal(err)
	}
	lab.ApplyObjects(t, kc.API.AdminConfig(), objs)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), kubeconfig)
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte(clusterYAML("fast", "unicast", "  openshiftRelease: \"4.19\"\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig); code != 0 || !strings.Contains(errOut, "wrote MachineConfig 50-vipctl-master") {
		t.Fatalf("update with a static change: %d\n%s%s", code, out, errOut)
	}
	nodesYAML, ok := machineConfigFile(t, kc, "50-vipctl-master", onnode.BootstrapNodesPath)
	if !ok {
		t.Fatalf("the MachineConfig vipctl update wrote ships no %s", onnode.BootstrapNodesPath)
	}
	clusterFile, ok := machineConfigFile(t, kc, "50-vipctl-master", onnode.ClusterConfigPath)
	if !ok {
		t.Fatalf("the MachineConfig ships no %s", onnode.ClusterConfigPath)
	}
	p := kc.Poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the API VIP answers", func() bool { ok, _ := p.Counts(); return ok > 5 })
	p.Stop()

	n := kc.ByName["master-0"]
	kc.API.RestartAPIServer(t, func() {
		// Reinstalled: the MachineConfig's files, nothing else of vipctl's.
		n.Keepalived.Stop()
		for _, d := range []string{onnode.KeepalivedDir, onnode.StateDir, onnode.RunDir} {
			if err := os.RemoveAll(filepath.Join(n.Target.Root, d)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(n.Target.Root, onnode.RunDir), 0o755); err != nil {
			t.Fatal(err)
		}
		for path, data := range map[string][]byte{onnode.BootstrapNodesPath: nodesYAML, onnode.ClusterConfigPath: clusterFile} {
			if err := os.WriteFile(filepath.Join(n.Target.Root, path), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errOut := vipctl(t, "runtimecfg", "--once", "--config", filepath.Join(n.Target.Root, onnode.ClusterConfigPath),
			"--bootstrap-nodes", filepath.Join(n.Target.Root, onnode.BootstrapNodesPath), "--node-name", n.Name, "--root", n.Target.Root, "--netns", n.Target.Netns)
		if code != 0 || strings.Contains(errOut, "without VRRP instances") {
			t.Fatalf("init container on the reinstalled node: %d\n%s%s", code, out, errOut)
		}
		n.StartKeepalived()
		// The other control-plane node goes: only the reinstalled one can
		// hold the API VIP now.
		kc.ByName["master-1"].Keepalived.Stop()
		kc.WaitHolder(apiVIP, 15*time.Second, func(h string) bool { return h == n.Name })
		p := kc.Poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
		lab.WaitFor(t, 15*time.Second, "the API VIP answers from the reinstalled node with the apiserver down", func() bool { ok, _ := p.Counts(); return ok > 5 })
		p.Stop()
	})
}

// setNodeLabel sets (value non-nil) or removes a label on a Node, as `oc
// label node` does.
func setNodeLabel(t *testing.T, kc *lab.KubeCluster, node, key string, value *string) {
	t.Helper()
	ctx := context.Background()
	n, err := kc.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if value == nil {
		delete(n.Labels, key)
	} else {
		n.Labels[key] = *value
	}
	if _, err := kc.Admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startServiceLab is a kubeCluster with every sidecar running, a
// LoadBalancer Service whose address the pool's workers carry, and an echo
// server behind it on every node. It returns the address and its settled
// holder.
func startServiceLab(t *testing.T) (*lab.KubeCluster, string, string) {
	t.Helper()
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
		n.StartEcho(t, "0.0.0.0:8080")
	}
	const vip = "198.51.100.128"
	kc.CreateLBService(t, "web", "")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the Service's address", func(c string) bool { return strings.Contains(c, vip+"/32") })
	}
	return kc, vip, kc.Settled(vip)
}

// TestExcludeLabelMovesServiceVIPs: the Kubernetes label
// node.kubernetes.io/exclude-from-external-load-balancers on the node
// holding a Service's VIP moves the VIP to a peer without one failed
// request (the node drops to priority 1 in its pool instances and is
// preempted while it still answers); removed, the VIP comes back, again
// without a failure.
func TestExcludeLabelMovesServiceVIPs(t *testing.T) {
	kc, vip, holder := startServiceLab(t)
	p := kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the Service VIP answers", func() bool { ok, _ := p.Counts(); return ok > 5 })
	empty := ""
	setNodeLabel(t, kc, holder, cluster.ExcludeLBLabel, &empty)
	other := kc.WaitHolder(vip, 15*time.Second, func(n string) bool { return n != holder })
	time.Sleep(time.Second)
	p.WantNoFailures(t, "exclude label on "+holder+": "+vip+" to "+other)
	if c := kc.KeepalivedConf(t, holder); !strings.Contains(c, "priority 1\n") {
		t.Errorf("%s: excluded, but no instance at priority 1:\n%s", holder, c)
	}

	p = kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the Service VIP answers from "+other, func() bool { ok, _ := p.Counts(); return ok > 5 })
	setNodeLabel(t, kc, holder, cluster.ExcludeLBLabel, nil)
	kc.WaitHolder(vip, 15*time.Second, func(n string) bool { return n == holder })
	time.Sleep(time.Second)
	p.WantNoFailures(t, "exclude label removed: "+vip+" back to "+holder)
}

// TestDrainCommandMovesVIPs: `vipctl drain NODE --wait` on the holder of a
// Service's VIP returns once the VIP has moved to a peer, as the Node
// annotations `vipctl status` reads say (on main, drain had no --wait and
// returned at once), without one failed request (the node's sidecar
// follows the annotation with the preStop's make-before-break handover);
// `vipctl status` lists the node as drained, and `vipctl undrain NODE`
// brings the Service's VIP back, again without a failure. A drain whose
// sidecar is gone times out with exit 1, naming what did not move.
func TestDrainCommandMovesVIPs(t *testing.T) {
	kc, vip, holder := startServiceLab(t)
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), kubeconfig)
	p := kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the Service VIP answers", func() bool { ok, _ := p.Counts(); return ok > 5 })
	lab.WaitFor(t, 15*time.Second, holder+" publishes "+vip, func() bool { return slices.Contains(publishedBy(t, kc, holder), vip) })

	start := time.Now()
	code, out, errOut := vipctl(t, "drain", holder, "--wait", "--timeout", "60s", "--kubeconfig", kubeconfig)
	t.Logf("drain --wait returned after %s", time.Since(start).Round(10*time.Millisecond))
	if code != 0 || !strings.Contains(errOut, "node "+holder+": waiting up to 1m0s for its sidecar to hand over ") {
		t.Fatalf("vipctl drain --wait: %d\n%s%s", code, out, errOut)
	}
	// Returned: the annotations already say where the VIP went.
	if slices.Contains(publishedBy(t, kc, holder), vip) {
		t.Errorf("drain --wait returned while %s still publishes %s", holder, vip)
	}
	other := ""
	for _, n := range kc.Nodes {
		if n.Name != holder && slices.Contains(publishedBy(t, kc, n.Name), vip) {
			other = n.Name
		}
	}
	if other == "" || !strings.HasPrefix(out, "node "+holder+": drained: moved ") || !strings.Contains(out, vip+" (pool/web/") || !strings.Contains(out, ") to "+other) {
		t.Fatalf("after drain --wait %s is published by %q; output:\n%s", vip, other, out)
	}
	kc.WaitHolder(vip, 15*time.Second, func(n string) bool { return n == other })
	time.Sleep(time.Second)
	p.WantNoFailures(t, "vipctl drain "+holder+": "+vip+" to "+other)
	if _, out, _ := vipctl(t, "status", "--kubeconfig", kubeconfig); !strings.Contains(out, "drained (vipctl undrain NODE ends it): "+holder) {
		t.Errorf("vipctl status does not list %s as drained:\n%s", holder, out)
	}
	if code, _, errOut := vipctl(t, "drain", "no-such-node", "--kubeconfig", kubeconfig); code != 1 || !strings.Contains(errOut, "node no-such-node: no such Node") {
		t.Errorf("drain of a missing node: %d %s", code, errOut)
	}
	if code, _, errOut := vipctl(t, "drain", "no-such-node", "--wait", "--kubeconfig", kubeconfig); code != 1 || !strings.Contains(errOut, "node no-such-node: no such Node") {
		t.Errorf("drain --wait of a missing node: %d %s", code, errOut)
	}

	p = kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 15*time.Second, "the Service VIP answers from "+other, func() bool { ok, _ := p.Counts(); return ok > 5 })
	if code, out, errOut := vipctl(t, "undrain", holder, "--kubeconfig", kubeconfig); code != 0 {
		t.Fatalf("vipctl undrain: %d\n%s%s", code, out, errOut)
	}
	kc.WaitHolder(vip, 15*time.Second, func(n string) bool { return n == holder })
	time.Sleep(time.Second)
	p.WantNoFailures(t, "vipctl undrain "+holder+": "+vip+" back")
	if got, _ := os.ReadFile(filepath.Join(kc.ByName[holder].Target.Root, onnode.DrainFile)); string(got) != "0\n" {
		t.Errorf("%s: drain file %q after the undrain", holder, got)
	}
	// The holder's sidecar stops: nobody follows the annotation, the VIP
	// stays, and --wait gives up after its timeout, naming it.
	lab.WaitFor(t, 15*time.Second, holder+" publishes "+vip+" again", func() bool { return slices.Contains(publishedBy(t, kc, holder), vip) })
	kc.Sidecars[holder].Stop()
	code, out, errOut = vipctl(t, "drain", holder, "--wait", "--timeout", "3s", "--kubeconfig", kubeconfig)
	if want := "error: drain not done: after 3s node " + holder + " still holds " + vip; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("drain --wait without a sidecar: exit %d\n%s%s\nwant exit 1 and %q", code, out, errOut, want)
	}
}

// publishedBy is what node's sidecar publishes it holds (vipctl.io/vips).
func publishedBy(t *testing.T, kc *lab.KubeCluster, node string) []string {
	t.Helper()
	n, err := kc.Admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held, err := v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range held {
		out = append(out, h.Address)
	}
	return out
}

// TestColdStartWithAPIDown: every node of the cluster goes down at once
// and comes back while the apiserver is still down (a power cut, a
// datacenter restart). Each node's init container renders from its
// last-good view, every node held back alike, so the API VIP comes up
// through haproxy and the Service's VIP answers again before any sidecar
// can reach the API. (On main the init render had no Service address: the
// Service's VIP stayed dark until the API was back.)
func TestColdStartWithAPIDown(t *testing.T) {
	kc, vip, _ := startServiceLab(t)
	bootstrap := writeBootstrapNodes(t, kc.State.Nodes)
	kc.Settled(apiVIP)
	kc.API.RestartAPIServer(t, func() {
		for _, n := range kc.Nodes {
			kc.Sidecars[n.Name].Stop()
			n.Keepalived.Stop()
		}
		start := time.Now()
		for _, n := range kc.Nodes {
			// A reboot empties /run.
			if err := os.RemoveAll(filepath.Join(n.Target.Root, onnode.RunDir)); err != nil {
				t.Fatal(err)
			}
			if code, out := startPod(t, kc, n.Name, bootstrap); code != 0 {
				t.Fatalf("%s: init container: %d %s", n.Name, code, out)
			}
		}
		api := kc.Poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
		svc := kc.Poll("http://"+vip+":8080/", 20*time.Millisecond)
		lab.WaitFor(t, 30*time.Second, "the API VIP answers with the apiserver down", func() bool { ok, _ := api.Counts(); return ok > 5 })
		t.Logf("cold start: the API VIP answered %s after the first node's init container started", api.FirstFrom(t, func(string) bool { return true }, start, time.Second).Sub(start).Round(time.Millisecond))
		lab.WaitFor(t, 30*time.Second, "the Service VIP answers with the apiserver down", func() bool { ok, _ := svc.Counts(); return ok > 5 })
		api.Stop()
		svc.Stop()
	})
}

// TestSidecarReachesAPIWithoutTheVIP: the kubeconfig names an address that
// does not answer (api-int, the API VIP, with no holder: a cold start),
// yet the sidecar reaches the real apiserver through a control-plane
// node's address (sidecar.WithAPIFallback, as `vipctl runtimecfg`
// sets it up from the nodes it rendered), syncs and records its
// last-good view. 127.0.0.2 stands for the dead VIP and the control-plane
// node's address is the apiserver's own, 127.0.0.1: the sidecar runs in the
// test's process, outside the lab's namespaces. The certificate carries
// 127.0.0.1, which the kubeconfig's server name says, as api-int's
// certificate carries api-int.
func TestSidecarReachesAPIWithoutTheVIP(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
	}
	cfg := kc.API.NodeConfig(t, "worker-0")
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = u.Hostname()
	cfg.Host = "https://127.0.0.2:" + u.Port()
	sidecar.WithAPIFallback(cfg, []cluster.Node{
		{Name: "master-0", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.21")}},
	}, "worker-0")

	n := kc.ByName["worker-0"]
	n.StopLocal() // the sidecar keeps the VIPs local from now on
	log := &lab.LogBuffer{}
	s, err := sidecar.New(sidecar.Options{
		OnceOptions: runtimecfg.OnceOptions{Target: n.Target, Config: kc.ConfigPath, NodeName: "worker-0"},
		Client:      kubernetes.NewForConfigOrDie(cfg),
		Debounce:    100 * time.Millisecond,
		Log:         slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("--- sidecar log:\n%s", log.Tail(30))
		}
	})
	lab.WaitFor(t, 30*time.Second, "the sidecar synced through the fallback", func() bool { return s.Ready() == nil })
	if data, err := os.ReadFile(filepath.Join(n.Target.Root, onnode.LastGoodPath)); err != nil || !strings.Contains(string(data), "worker-1") {
		t.Errorf("no last-good view from the API: %v", err)
	}
}
