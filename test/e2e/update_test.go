package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/internal/cli"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
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
		cm, err := e.admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
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
	cl := update.Cluster{Kube: e.admin, Namespace: onnode.Namespace}
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

// mirrored names spec.images on a mirror, as docs/install.md has the
// admin do: every image changes, so the allocator's Deployment must too.
const mirrored = `  images:
    keepalived: registry.example.test/vipctl/vipctl:v9
    haproxy: registry.example.test/vipctl/vipctl:v9
    vipctl: registry.example.test/vipctl/vipctl:v9
`

// allocatorImage is the image of the live allocator Deployment.
func allocatorImage(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	d, err := c.AppsV1().Deployments(onnode.Namespace).Get(context.Background(), manifests.AllocatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// TestUpdateBringsRenderedObjectsInLine: `vipctl update` keeps every
// object of manifests/vipctl.yaml in line with the file, not only the
// ConfigMap and the MachineConfigs. A change of spec.images moves the
// allocator's Deployment to the new image (on main it stayed on the old
// one, and the plan did not mention it); the plan names the field; an
// object deleted by hand comes back; the applies are server-side with
// the resourceVersion read for the plan, so an edit made meanwhile
// fails the update instead of being overwritten; and a user who may edit
// the ConfigMap but not those objects is told what to re-apply.
func TestUpdateBringsRenderedObjectsInLine(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	e.api.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	ctx := context.Background()
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(args ...string) (int, string, string) {
		return vipctl(t, append(args, "--kubeconfig", kubeconfig)...)
	}
	oldImage := allocatorImage(t, e.admin)

	// The lab applied manifests/vipctl.yaml only: the update adds what
	// monitoring.yaml holds and the cluster can take, and notes the kinds
	// it does not serve (no prometheus-operator yet) and the namespace
	// it lacks (the console's, off OpenShift).
	code, out, errOut := run("update", "-f", file)
	for _, want := range []string{"+ ClusterRole vipctl-metrics-reader (new)\n", "+ Role vipctl-system/vipctl-prometheus (new)\n", "+ Service vipctl-system/vipctl-runtimecfg-metrics (new)\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("update with monitoring.yaml not applied: %d, want %q\n%s%s", code, want, out, errOut)
		}
	}
	const unplaced = "note: left out, the cluster has no place for them: ConfigMap openshift-config-managed/vipctl-dashboard (no namespace openshift-config-managed); " +
		"PrometheusRule vipctl-system/vipctl-alerts (no prometheusrules in monitoring.coreos.com/v1); " +
		"ServiceMonitor vipctl-system/vipctl-runtimecfg-metrics, ServiceMonitor vipctl-system/vipctl-allocator-metrics (no servicemonitors in monitoring.coreos.com/v1)"
	if !strings.Contains(errOut, unplaced) || strings.Contains(out, "ServiceMonitor") {
		t.Fatalf("update without prometheus-operator: want stderr to hold %q, stdout no ServiceMonitor\n%s%s", unplaced, out, errOut)
	}
	// prometheus-operator installed, on OpenShift: the rest follows.
	e.api.InstallCRDs(t, testapiserver.PrometheusOperatorCRDs(t, "servicemonitors", "prometheusrules")...)
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.ConsoleDashboardNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("update", "-f", file)
	for _, want := range []string{"+ ServiceMonitor vipctl-system/vipctl-allocator-metrics (new)\n", "+ PrometheusRule vipctl-system/vipctl-alerts (new)\n", "+ ConfigMap openshift-config-managed/vipctl-dashboard (new)\n"} {
		if code != 0 || !strings.Contains(out, want) || strings.Contains(errOut, "note:") {
			t.Fatalf("update with prometheus-operator: %d, want %q and no note\n%s%s", code, want, out, errOut)
		}
	}

	// Objects as rendered: nothing to do.
	if code, out, errOut := run("update", "-f", file); code != 0 || out != "no change\n" {
		t.Fatalf("update with nothing changed: %d\n%s%s", code, out, errOut)
	}
	// An alert's rule edited by hand is put back: the PrometheusRule as
	// rendered is vipctl's.
	alertRules := dynamic.NewForConfigOrDie(e.api.AdminConfig()).Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}).Namespace(onnode.Namespace)
	rule, err := alertRules.Get(ctx, manifests.AlertsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	alerts[0].(map[string]any)["for"] = "1h"
	_ = unstructured.SetNestedSlice(groups[0].(map[string]any), alerts, "rules")
	_ = unstructured.SetNestedSlice(rule.Object, groups, "spec", "groups")
	if _, err := alertRules.Update(ctx, rule, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || !strings.Contains(out, "~ PrometheusRule vipctl-system/vipctl-alerts\n    spec.groups[0].rules[0].for: \"1h\" -> ") {
		t.Fatalf("update after an alert was edited by hand: %d\n%s%s", code, out, errOut)
	}

	// New images: the plan names the Deployment's field, a dry run
	// leaves it, the update applies it.
	if err := os.WriteFile(file, []byte(clusterYAML("fast", "unicast", updateBase+mirrored)), 0o644); err != nil {
		t.Fatal(err)
	}
	wantField := `spec.template.spec.containers[0].image: "` + oldImage + `" -> "registry.example.test/vipctl/vipctl:v9"`
	code, out, errOut = run("update", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(out, "~ Deployment vipctl-system/vipctl-allocator\n    "+wantField+"\n") {
		t.Fatalf("dry run: %d\n%s%s", code, out, errOut)
	}
	if got := allocatorImage(t, e.admin); got != oldImage {
		t.Fatalf("--dry-run changed the allocator's image to %s", got)
	}
	code, out, errOut = run("update", "-f", file)
	if code != 0 || !strings.Contains(errOut, "applied Deployment vipctl-system/vipctl-allocator\n") || !strings.Contains(errOut, "wrote MachineConfig 50-vipctl-master") {
		t.Fatalf("update: %d\n%s%s", code, out, errOut)
	}
	if got := allocatorImage(t, e.admin); got != "registry.example.test/vipctl/vipctl:v9" {
		t.Fatalf("after the update the allocator runs %s", got)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || out != "no change\n" {
		t.Fatalf("update right after: %d\n%s%s", code, out, errOut)
	}

	// An object deleted by hand is recreated.
	if err := e.admin.PolicyV1().PodDisruptionBudgets(onnode.Namespace).Delete(ctx, manifests.AllocatorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("update", "-f", file)
	if code != 0 || !strings.Contains(out, "+ PodDisruptionBudget vipctl-system/vipctl-allocator (new)\n") {
		t.Fatalf("update after the PDB was deleted: %d\n%s%s", code, out, errOut)
	}
	if _, err := e.admin.PolicyV1().PodDisruptionBudgets(onnode.Namespace).Get(ctx, manifests.AllocatorName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the PDB is not back: %v", err)
	}

	// An edit between the plan and the apply: the apply fails, the edit
	// stays.
	cl := update.Cluster{Kube: e.admin, Dynamic: dynamic.NewForConfigOrDie(e.api.AdminConfig()), Namespace: onnode.Namespace}
	live, cm, err := cl.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	back, err := v1alpha1.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := update.Compute(live, back, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Objects, _, err = cl.ObjectChanges(ctx, plan.Desired); err != nil || len(plan.Objects) != 1 {
		t.Fatalf("object changes back to the old image: %+v, %v", plan.Objects, err)
	}
	d, err := e.admin.AppsV1().Deployments(onnode.Namespace).Get(ctx, manifests.AllocatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "registry.example.test/someone/else:v1"
	if _, err := e.admin.AppsV1().Deployments(onnode.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Apply(ctx, plan, cm, false, io.Discard); err == nil || !strings.Contains(err.Error(), "Deployment vipctl-system/vipctl-allocator changed since it was read") {
		t.Errorf("apply over a concurrent edit: %v, want a conflict", err)
	}
	if got := allocatorImage(t, e.admin); got != "registry.example.test/someone/else:v1" {
		t.Errorf("the concurrent edit was overwritten: %s", got)
	}

	// A user who may edit the pools but not the other objects: the pools
	// are updated, and the plan says what to apply instead.
	rbac := e.admin.RbacV1()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list"}},
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pool-editor"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pool-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pool-editor"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "pool-editor"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The file as the ConfigMap is now: no static change, whose
	// MachineConfigs would need the Nodes.
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	editor := filepath.Join(t.TempDir(), "editor.kubeconfig")
	testapiserver.WriteKubeconfig(t, e.api.UserConfig(t, "pool-editor"), editor)
	code, out, errOut = vipctl(t, "update", "-f", file, "--kubeconfig", editor, "--add-pool", "extra=198.51.100.64/27")
	if code != 0 || !strings.Contains(out, "+ pool extra") ||
		!strings.Contains(out, "! Namespace vipctl-system, ServiceAccount vipctl-system/vipctl-allocator, ") ||
		!strings.Contains(out, ": not allowed to read or apply, left as they are; apply manifests/vipctl.yaml and manifests/monitoring.yaml of `vipctl render` as a user who may") {
		t.Errorf("update by a pool editor: %d\n%s%s", code, out, errOut)
	}
}

// TestUpdateRefusesMachineConfigsTheClusterCannotParse: a file targeting
// OpenShift 4.19 (Ignition 3.5) against a cluster whose ClusterVersion
// says 4.16 (its Machine Config Operator parses 3.4 at most). On main the
// update warned and wrote them, exit 0, and the pools would degrade; now
// it refuses, naming both releases, the spec and the fixes, and writes
// nothing; a dry run shows the refusal in the plan; --force writes them;
// a target the cluster parses writes with no word.
func TestUpdateRefusesMachineConfigsTheClusterCannotParse(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	e.api.InstallCRDs(t, testapiserver.MachineConfigCRD(t), testapiserver.ClusterVersionCRD(t))
	e.api.SetClusterVersion(t, "4.16.12")
	ctx := context.Background()
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(args ...string) (int, string, string) {
		return vipctl(t, append(args, "--kubeconfig", kubeconfig)...)
	}
	dyn := dynamic.NewForConfigOrDie(e.api.AdminConfig())
	ignition := func(name string) string {
		mc, err := dyn.Resource(machineconfig.GVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedString(mc.Object, "spec", "config", "ignition", "version")
		return v
	}
	target := func(release string) {
		t.Helper()
		// A mirror in spec.images: stderr holds the refusal alone, not
		// also the development image's warning.
		const mirror = "registry.example.test/vipctl/vipctl:v0.5.0"
		// No monitoring stack either: the cluster has no
		// prometheus-operator to take its objects (a note otherwise).
		text := strings.Replace(base, "spec:\n", "spec:\n  openshiftRelease: \""+release+"\"\n  images: {keepalived: "+mirror+", haproxy: "+mirror+", vipctl: "+mirror+"}\n  monitoring: {stack: none}\n", 1)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	target("4.19")
	cmBefore, _, _ := update.Cluster{Kube: e.admin, Namespace: onnode.Namespace}.Live(ctx)
	code, out, errOut := run("update", "-f", file)
	// The refusal names the file (issue 47).
	refusal := "error: " + file + ": refusing to write MachineConfigs the cluster cannot parse: the cluster runs OpenShift 4.16.12, older than spec.openshiftRelease 4.19: its Machine Config Operator parses Ignition 3.4.0 at most and would refuse MachineConfigs written for 4.19 (Ignition 3.5.0), and its machine-config pools would degrade; set spec.openshiftRelease to 4.16 in the file, or pass --force to write them anyway\n"
	if code != 1 || errOut != refusal {
		t.Errorf("update to 4.19 on 4.16: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and:\n%s", code, out, errOut, refusal)
	}
	if v := ignition("50-vipctl-master"); v != "" {
		t.Errorf("a refused update wrote a MachineConfig (Ignition %s)", v)
	}
	if cmAfter, _, _ := (update.Cluster{Kube: e.admin, Namespace: onnode.Namespace}).Live(ctx); cmAfter.Spec.OpenShiftRelease != cmBefore.Spec.OpenShiftRelease {
		t.Errorf("a refused update wrote the ConfigMap (openshiftRelease %q)", cmAfter.Spec.OpenShiftRelease)
	}

	code, out, errOut = run("update", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(out, "! the cluster runs OpenShift 4.16.12, older than spec.openshiftRelease 4.19: its Machine Config Operator parses Ignition 3.4.0 at most and would refuse MachineConfigs written for 4.19 (Ignition 3.5.0): refused unless --force (or set spec.openshiftRelease to 4.16)\n") {
		t.Errorf("dry run: exit %d\n%s%s", code, out, errOut)
	}

	// The fix the refusal names: a target the cluster parses.
	target("4.16")
	if code, out, errOut := run("update", "-f", file); code != 0 || strings.Contains(errOut, "warning: the cluster runs") || ignition("50-vipctl-master") != "3.4.0" {
		t.Errorf("update to 4.16 on 4.16: exit %d, Ignition %q\n%s%s", code, ignition("50-vipctl-master"), out, errOut)
	}
	// The same spec on a newer target: written, with advice.
	target("4.18")
	if code, out, errOut := run("update", "-f", file); code != 0 || !strings.Contains(errOut, "warning: the cluster runs OpenShift 4.16.12, older than spec.openshiftRelease 4.18; set spec.openshiftRelease to 4.16\n") {
		t.Errorf("update to 4.18 on 4.16: exit %d\n%s%s", code, out, errOut)
	}
	// --force writes what was refused.
	target("4.19")
	code, out, errOut = run("update", "-f", file, "--force")
	if code != 0 || !strings.Contains(errOut, "writing the MachineConfigs anyway (--force)") || ignition("50-vipctl-master") != "3.5.0" {
		t.Errorf("update to 4.19 on 4.16 with --force: exit %d, Ignition %q\n%s%s", code, ignition("50-vipctl-master"), out, errOut)
	}
}
