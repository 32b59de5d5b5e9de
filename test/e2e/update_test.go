package e2e

import (
	"bytes"
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

	"github.com/vipctl/vipctl/internal/cli"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/pkg/update"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// vipctl runs the CLI in process and returns its exit code and output.
func vipctl(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(args, cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

const updateBase = `  servicePools:
    - name: web
      addresses: [198.51.100.128/27]
`

// TestUpdateAndStatus drives `vipctl update` and `vipctl status` against
// the real apiserver with the allocator running: adding a pool gives a new
// Service an address from it, an unused pool is removed, removing a pool in
// use is refused naming the Services unless --force, concurrent updates
// conflict, --dry-run and bad edits write nothing, and a static change
// writes MachineConfigs the CRD accepts.
func TestUpdateAndStatus(t *testing.T) {
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	e.api.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	lab.StartAllocator(t, e.api, e.token, "a-0")
	ctx := context.Background()
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(args ...string) (int, string, string) {
		return vipctl(t, append(args, "--kubeconfig", kubeconfig)...)
	}
	configMap := func() string {
		cm, err := e.admin.CoreV1().ConfigMaps(render.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data[v1alpha1.ConfigMapKey]
	}

	// --dry-run: the plan, nothing written (neither the cluster nor the file).
	before, fileBefore := configMap(), readFile(t, file)
	code, out, errOut := run("update", "-f", file, "--add-pool", "extra=198.51.100.64/27", "--dry-run")
	if code != 0 || !strings.Contains(out, "+ pool extra (VRRP IDs pool/extra/0=") || !strings.Contains(out, "no node reboots") {
		t.Fatalf("dry run: %d\n%s%s", code, out, errOut)
	}
	if configMap() != before || readFile(t, file) != fileBefore {
		t.Fatal("--dry-run wrote something")
	}

	// Bad edits: refused with the field, nothing written.
	for _, bad := range [][]string{
		{"--add-pool", "extra=198.51.100.0/33"},
		{"--add-pool", "extra=198.51.100.130/32"},
		{"--set-pool", "nope=198.51.100.64/27"},
		{"--add-pool", "extra=198.51.100.5/32"},
	} {
		code, _, errOut := run(append([]string{"update", "-f", file}, bad...)...)
		if code != 1 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 1 with an error", bad, code, errOut)
		}
	}
	if configMap() != before || readFile(t, file) != fileBefore {
		t.Fatal("a refused edit wrote something")
	}

	// Add a pool: written, the file rewritten, a Service asking for it
	// gets an address from it.
	code, out, errOut = run("update", "-f", file, "--add-pool", "extra=198.51.100.64/27")
	if code != 0 {
		t.Fatalf("add: %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(readFile(t, file), "extra") || !strings.Contains(configMap(), "extra") {
		t.Fatal("the added pool is not in the file and the ConfigMap")
	}
	e.service(t, "default", "in-extra", annotate(v1alpha1.AnnotationPool, "extra"))
	if got := e.waitIPs(t, "default", "in-extra", 1); !strings.HasPrefix(got[0], "198.51.100.6") {
		t.Errorf("Service in the new pool got %v", got)
	}

	// Removing the pool in use is refused with the Service named.
	before = configMap()
	code, _, errOut = run("update", "-f", file, "--remove-pool", "extra")
	if code == 0 || !strings.Contains(errOut, "default/in-extra") || configMap() != before {
		t.Fatalf("removing a pool in use: exit %d, %q", code, errOut)
	}
	// --force releases with an Event; the allocator has nowhere to put the
	// Service then (web does not admit it by name), and says so.
	code, _, errOut = run("update", "-f", file, "--remove-pool", "extra", "--force")
	if code != 0 {
		t.Fatalf("--force: %d %s", code, errOut)
	}
	e.waitEvent(t, "default", "in-extra", "IPReleased", "vipctl update --force released")
	e.waitEvent(t, "default", "in-extra", "AllocationFailed", `pool "extra" does not exist`)

	// Removing an unused pool just works.
	code, _, errOut = run("update", "-f", file, "--add-pool", "spare=198.51.100.96/28")
	if code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut = run("update", "-f", file, "--remove-pool", "spare")
	if code != 0 || !strings.Contains(out, "- pool spare") || strings.Contains(configMap(), "spare") {
		t.Fatalf("removing an unused pool: %d\n%s%s", code, out, errOut)
	}

	// Two admins: both read, one writes, the other's write conflicts.
	cl := update.Cluster{Kube: e.admin, Namespace: render.Namespace}
	cfg := []byte(readFile(t, file))
	live1, cm1, err := cl.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live2, cm2, err := cl.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, a, _ := update.ApplyEdits(cfg, []update.Edit{{Op: "add", Spec: "one=198.51.100.96/28"}})
	_, b, _ := update.ApplyEdits(cfg, []update.Edit{{Op: "add", Spec: "two=198.51.100.112/28"}})
	pa, err := update.Compute(live1, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := update.Compute(live2, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := cl.Apply(ctx, pa, cm1, false, &log); err != nil {
		t.Fatal(err)
	}
	if err := cl.Apply(ctx, pb, cm2, false, &log); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Errorf("the second concurrent update: %v, want a conflict", err)
	}
	if s := configMap(); !strings.Contains(s, "name: one") || strings.Contains(s, "name: two") {
		t.Errorf("after the conflict the ConfigMap holds:\n%s", s)
	}

	// A static change writes MachineConfigs and says nodes will reboot.
	if err := os.WriteFile(file, []byte(strings.Replace(base, "vrrp: {profile: fast", "vrrp: {profile: default", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("update", "-f", file, "--force")
	if code != 0 || !strings.Contains(out, "reboot") || !strings.Contains(errOut, "wrote MachineConfig 50-vipctl-master") {
		t.Fatalf("static change: %d\n%s%s", code, out, errOut)
	}

	// status: no node publishes what it holds yet, so every VIP lacks a
	// holder and the exit is 2; then a node publishes the API VIP.
	code, out, _ = run("status")
	if code != cli.ExitFinding || !strings.Contains(out, "no-holder") {
		t.Fatalf("status with no holders: %d\n%s", code, out)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0", Annotations: map[string]string{}}}
	held := v1alpha1.HeldVIPs{{Address: apiVIP, Instance: "api", Since: time.Now().UTC().Truncate(time.Second)}}
	node.Annotations[v1alpha1.AnnotationNodeVIPs] = held.String()
	if _, err := e.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run("status", "-o", "json")
	var report status.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	apiHeld := slices.ContainsFunc(report.VIPs, func(r status.VIPStatus) bool {
		return r.Address == apiVIP && r.State == status.StateOK && slices.Equal(r.Holders, []string{"master-0"})
	})
	if !apiHeld || report.BGPSessions != nil {
		t.Errorf("status json: want the API VIP held by master-0, no BGP sessions:\n%s", out)
	}
	// in-extra lost its address and nothing else is allocated: every VIP
	// has its holder now, so the exit is 0.
	if code != 0 {
		t.Errorf("status exit %d with every VIP held:\n%s", code, out)
	}
}

// updateFiles writes what `vipctl update` is run with: an admin
// kubeconfig for api and the cluster file holding clusterYAML.
func updateFiles(t *testing.T, api *testapiserver.Server, clusterYAML string) (kubeconfig, file string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, api.AdminConfig(), kubeconfig)
	file = filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte(clusterYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, file
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUpdateInTheLab: the whole chain on the lab's nodes. `vipctl update`
// adds a pool; a Service asking for it gets an address from the allocator,
// the sidecars put it into keepalived and it answers from the client; the
// pool, unused again, is removed and its VRRP instances leave every node.
// A client polling an untouched Service VIP every 10 ms never fails
// meanwhile.
func TestUpdateInTheLab(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
		n.StartEcho(t, "0.0.0.0:8080")
	}
	ctx := context.Background()
	kc.CreateLBService(t, "untouched", "")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the untouched VIP", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
	}
	p := kc.Poll("http://198.51.100.128:8080/", 10*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the untouched VIP answers", func() bool { ok, _ := p.Counts(); return ok > 20 })

	kubeconfig, file := updateFiles(t, kc.API, clusterYAML("fast", "unicast", sidecarPools))
	if code, out, errOut := vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig, "--add-pool", "extra=198.51.100.64/27"); code != 0 {
		t.Fatalf("update: %d\n%s%s", code, out, errOut)
	}
	kc.CreateLBService(t, "in-extra", "198.51.100.70")
	kc.WaitConf(t, "master-0", "the new pool's address", func(c string) bool { return strings.Contains(c, "198.51.100.70/32") })
	q := kc.Poll("http://198.51.100.70:8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the new pool's address answers", func() bool { ok, _ := q.Counts(); return ok > 5 })
	q.Stop()

	if err := kc.Admin.CoreV1().Services("default").Delete(ctx, "in-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 30*time.Second, "the allocator releases in-extra", func() bool { return countAllocated(t, kc.Admin) == 1 })
	if code, out, errOut := vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig, "--remove-pool", "extra"); code != 0 {
		t.Fatalf("remove: %d\n%s%s", code, out, errOut)
	}
	for _, n := range kc.Nodes {
		kc.WaitConf(t, n.Name, "no instance of the removed pool", func(c string) bool { return !strings.Contains(c, "pool_extra_") })
	}
	time.Sleep(time.Second)
	ok, fail := p.Stop()
	if fail != 0 {
		t.Errorf("the untouched VIP failed %d of %d requests during the updates", fail, ok+fail)
	}
}
