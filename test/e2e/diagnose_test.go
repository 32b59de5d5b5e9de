package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/diagnose"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestDiagnose: `vipctl diagnose master-0` against the real apiserver with
// the allocator running gathers the version, the ConfigMap and the
// effective config, the status as table and JSON, master-0's published
// VIPs, the allocator's Events and master-0's sidecar Events (not
// master-1's), and master-0's mirror pod; the pod's log, which no kubelet
// serves here, is recorded as unavailable with the API server's reason
// instead of failing the run. A node's bundle from `diagnose --local`
// joins with --include; its keepalived, not running, is a problem it
// records, not a failure. The bundle is never written over an existing
// file without --force, and an unknown node writes nothing.
func TestDiagnose(t *testing.T) {
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	lab.StartAllocator(t, e.api, e.token, "a-0")
	kubeconfig, _ := updateFiles(t, e.api, base)
	ctx := context.Background()

	held := v1alpha1.HeldVIPs{{Address: apiVIP, Instance: v1alpha1.KeyAPI, Since: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}}
	for _, n := range []string{"master-0", "master-1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{}}}
		if n == "master-0" {
			node.Annotations[v1alpha1.AnnotationNodeVIPs] = held.String()
		}
		if _, err := e.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The kubelet's mirror pod of the node's keepalived static pod.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: onnode.KeepalivedPodName + "-" + n, Namespace: onnode.Namespace,
				Annotations: map[string]string{"kubernetes.io/config.mirror": "hash"}},
			Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "keepalived", Image: "vipctl"}}},
		}
		if _, err := e.admin.CoreV1().Pods(onnode.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// What the node's sidecar records when it keeps its last good config.
		now := metav1.Now()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: n + ".", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: n},
			Reason:         "ConfigKept", Type: corev1.EventTypeWarning, Message: "keeping the last good config on " + n,
			Source:         corev1.EventSource{Component: v1alpha1.EventSourceSidecar, Host: n},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		if _, err := e.admin.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Service asking for an address outside every pool: the allocator
	// records why it cannot serve it.
	e.service(t, "default", "outside", annotate(v1alpha1.AnnotationLoadBalancerIPs, "203.0.113.9"))
	e.waitEvent(t, "default", "outside", "AllocationFailed", "outside every pool")

	// master-0's own part, from a node laid out in a namespace of the lab.
	nl := netlab.New(t)
	h := nl.AddHost("master-0", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", apiVIP + "/32"}})
	dir := t.TempDir()
	local := filepath.Join(dir, "master-0.tar.gz")
	if code, _, errOut := vipctl(t, "diagnose", "--local", "--node-name", "master-0", "--root", t.TempDir(), "--netns", h.NS, "-o", local); code != 0 {
		t.Fatalf("diagnose --local: %d\n%s", code, errOut)
	}

	out := filepath.Join(dir, "bundle.tar.gz")
	code, _, errOut := vipctl(t, "diagnose", "master-0", "-o", out, "--include", local, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(errOut, "wrote "+out) {
		t.Fatalf("diagnose: %d\n%s", code, errOut)
	}
	a := readBundle(t, out)
	file := func(name string) string {
		t.Helper()
		b, ok := a.File(name)
		if !ok {
			t.Fatalf("no %s in the bundle: %v", name, a.Names())
		}
		return string(b)
	}
	if v := file("version.json"); !strings.Contains(v, `"version"`) {
		t.Errorf("version.json:\n%s", v)
	}
	if cm := file("config/configmap.yaml"); !strings.Contains(cm, "name: "+v1alpha1.ConfigMapName) || !strings.Contains(cm, "198.51.100.128/27") {
		t.Errorf("configmap.yaml:\n%s", cm)
	}
	// The effective config has the defaults filled in.
	if eff, err := v1alpha1.Parse([]byte(file("config/effective.yaml"))); err != nil || eff.Spec.VRRP.Interface == "" {
		t.Errorf("effective.yaml: %v\n%s", err, file("config/effective.yaml"))
	}
	var report status.Report
	if err := json.Unmarshal([]byte(file("status/status.json")), &report); err != nil || len(report.VIPs) == 0 || report.VIPs[0].State != status.StateOK {
		t.Errorf("status.json: %v\n%s", err, file("status/status.json"))
	}
	if txt := file("status/status.txt"); !strings.Contains(txt, "INSTANCE") || !strings.Contains(txt, "master-0") {
		t.Errorf("status.txt:\n%s", txt)
	}
	var rec diagnose.NodeRecord
	if err := json.Unmarshal([]byte(file("nodes/master-0/node.json")), &rec); err != nil || len(rec.Held) != 1 || rec.Held[0].Address != apiVIP ||
		rec.Annotations[v1alpha1.AnnotationNodeVIPs] != held.String() {
		t.Errorf("master-0's record: %v\n%s", err, file("nodes/master-0/node.json"))
	}
	events := file("events/events.txt")
	for _, want := range []string{"AllocationFailed", "service/default/outside", "keeping the last good config on master-0"} {
		if !strings.Contains(events, want) {
			t.Errorf("events.txt lacks %q:\n%s", want, events)
		}
	}
	if strings.Contains(events, "master-1") {
		t.Errorf("events.txt has master-1's sidecar Event, only master-0 was asked for:\n%s", events)
	}
	pod := "pods/" + onnode.KeepalivedPodName + "-master-0/"
	if p := file(pod + "pod.yaml"); !strings.Contains(p, "nodeName: master-0") {
		t.Errorf("pod.yaml:\n%s", p)
	}
	if why := file(pod + "keepalived.log.unavailable"); why == "" {
		t.Error("the unavailable log gives no reason")
	}
	if p := file(diagnose.ProblemsFile); !strings.Contains(p, pod+"keepalived.log") {
		t.Errorf("problems.json does not name the log:\n%s", p)
	}
	for _, name := range a.Names() {
		if strings.HasPrefix(name, "nodes/master-1/") || strings.Contains(name, "-master-1/") {
			t.Errorf("%s in the bundle: only master-0 was asked for", name)
		}
	}
	if ip := file("nodes/master-0/local/network/ip-addr.txt"); !strings.Contains(ip, apiVIP+"/32") {
		t.Errorf("the included node bundle's addresses:\n%s", ip)
	}
	// No keepalived runs on this node: recorded, and the run did not fail.
	if p := file("nodes/master-0/local/" + diagnose.ProblemsFile); !strings.Contains(p, `"what": "keepalived"`) || !strings.Contains(p, "not running") {
		t.Errorf("the node's problems.json does not say keepalived is not running:\n%s", p)
	}
	if own := file("nodes/master-0/local/network/nftables-vipctl.json"); own != "[]\n" {
		t.Errorf("vipctl's nftables tables of a node without any: %s", own)
	}

	// Never over an existing file without --force; with it, replaced.
	before := readFile(t, out)
	code, _, errOut = vipctl(t, "diagnose", "-o", out, "--kubeconfig", kubeconfig)
	if code != 1 || errOut != "error: --output: "+out+" exists; pass --force to replace it\n" || readFile(t, out) != before {
		t.Errorf("over an existing bundle: exit %d, %q", code, errOut)
	}
	if code, _, errOut = vipctl(t, "diagnose", "-o", out, "--force", "--kubeconfig", kubeconfig); code != 0 {
		t.Errorf("--force: exit %d, %s", code, errOut)
	}
	if _, ok := readBundle(t, out).File("nodes/master-1/node.json"); !ok {
		t.Error("without NODE arguments every node is gathered")
	}
	// An unknown node: exit 1 naming it, nothing written.
	none := filepath.Join(dir, "none.tar.gz")
	code, _, errOut = vipctl(t, "diagnose", "master-9", "-o", none, "--kubeconfig", kubeconfig)
	if _, err := os.Stat(none); code != 1 || errOut != "error: no node master-9 in the cluster\n" || err == nil {
		t.Errorf("unknown node: exit %d, %q, stat %v", code, errOut, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left in the directory: %v", entries)
	}
}

func readBundle(t *testing.T, path string) *diagnose.Archive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	a, err := diagnose.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a.Names(), "version.json") {
		t.Fatalf("%s: no version.json: %v", path, a.Names())
	}
	return a
}
