package e2e

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/update"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestUpdateKeepsMonitoringObjectsLikeTheOthers: the objects of
// manifests/monitoring.yaml go through update's plan and writes like the
// allocator's: with prometheus-operator's CRDs installed, a PrometheusRule
// whose alert someone edited is a plan line with the field path; an edit
// made between the plan and the apply fails the apply ("changed since it
// was read") and stays; and a plan refused for the addresses it would take
// from a Service writes none of them, the ConfigMap neither.
// (TestUpdateBringsRenderedObjectsInLine has the note on a cluster
// without the CRDs, and the objects added once they are there.)
func TestUpdateKeepsMonitoringObjectsLikeTheOthers(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	e.api.InstallCRDs(t, testapiserver.PrometheusOperatorCRDs(t, "servicemonitors", "prometheusrules")...)
	ctx := context.Background()
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.ConsoleDashboardNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(args ...string) (int, string, string) {
		return vipctl(t, append(args, "--kubeconfig", kubeconfig)...)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || !strings.Contains(out, "+ PrometheusRule vipctl-system/vipctl-alerts (new)\n") || strings.Contains(errOut, "note:") {
		t.Fatalf("first update: %d\n%s%s", code, out, errOut)
	}

	dyn := dynamic.NewForConfigOrDie(e.api.AdminConfig())
	rules := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}).Namespace(onnode.Namespace)
	// alerts reads the PrometheusRule: the object, its groups, and the
	// rules of the first group.
	alerts := func() (rule *unstructured.Unstructured, groups, first []any) {
		t.Helper()
		rule, err := rules.Get(ctx, manifests.AlertsName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		groups, _, _ = unstructured.NestedSlice(rule.Object, "spec", "groups")
		first, _, _ = unstructured.NestedSlice(groups[0].(map[string]any), "rules")
		return rule, groups, first
	}
	// forNow is the first alert's `for`.
	forNow := func() string {
		t.Helper()
		_, _, first := alerts()
		v, _ := first[0].(map[string]any)["for"].(string)
		return v
	}
	// setFor sets the first alert's `for`, as someone editing the
	// PrometheusRule by hand would, and returns the value it had.
	setFor := func(value string) string {
		t.Helper()
		rule, groups, first := alerts()
		was, _ := first[0].(map[string]any)["for"].(string)
		first[0].(map[string]any)["for"] = value
		_ = unstructured.SetNestedSlice(groups[0].(map[string]any), first, "rules")
		_ = unstructured.SetNestedSlice(rule.Object, groups, "spec", "groups")
		if _, err := rules.Update(ctx, rule, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return was
	}

	// An edit between the plan and the apply: the apply fails naming the
	// PrometheusRule, and the edit stays.
	rendered := setFor("1h")
	cl := update.Cluster{Kube: e.admin, Dynamic: dyn, Namespace: onnode.Namespace}
	live, cm, err := cl.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := v1alpha1.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := update.Compute(live, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan.Objects, _, err = cl.ObjectChanges(ctx, plan.Desired)
	if err != nil || len(plan.Objects) != 1 || plan.Objects[0].String() != "PrometheusRule vipctl-system/vipctl-alerts" {
		t.Fatalf("object changes after the alert was edited: %+v, %v; want the PrometheusRule alone", plan.Objects, err)
	}
	want := `spec.groups[0].rules[0].for: "1h" -> "` + rendered + `"`
	if f := plan.Objects[0].Fields; len(f) != 1 || f[0] != want {
		t.Errorf("the PrometheusRule's changed fields: %q, want [%q]", f, want)
	}
	setFor("2h")
	if err := cl.Apply(ctx, plan, cm, false, io.Discard); err == nil || !strings.Contains(err.Error(), "PrometheusRule vipctl-system/vipctl-alerts changed since it was read (another update?): run vipctl update again") {
		t.Errorf("apply over a concurrent edit of the PrometheusRule: %v, want a conflict", err)
	}
	if got := forNow(); got != "2h" {
		t.Errorf("the concurrent edit was overwritten: for %q, want 2h", got)
	}

	// A plan refused for the address it takes from a Service writes
	// nothing: not the PrometheusRule, not the ConfigMap.
	e.service(t, "default", "holder")
	svc, err := e.admin.CoreV1().Services("default").Get(ctx, "holder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.130"}}
	if _, err := e.admin.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(base, "198.51.100.128/27", "198.51.100.64/27", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _, _ := cl.Live(ctx)
	code, out, errOut := run("update", "-f", file)
	if code != 1 || !strings.Contains(out, "~ PrometheusRule vipctl-system/vipctl-alerts\n    spec.groups[0].rules[0].for: \"2h\" -> ") ||
		!strings.Contains(errOut, "the edit would take addresses from Services: default/holder (198.51.100.130)") {
		t.Errorf("update that would orphan default/holder: exit %d, want 1 with the PrometheusRule in the plan and the Service named\n%s%s", code, out, errOut)
	}
	if got := forNow(); got != "2h" {
		t.Errorf("a refused update wrote the PrometheusRule: for %q, want 2h", got)
	}
	if after, _, _ := cl.Live(ctx); after.Spec.ServicePools[0].Addresses[0] != before.Spec.ServicePools[0].Addresses[0] {
		t.Errorf("a refused update wrote the ConfigMap: %v", after.Spec.ServicePools[0].Addresses)
	}

	// The file as it was: the PrometheusRule is put back as rendered.
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || !strings.Contains(errOut, "applied PrometheusRule vipctl-system/vipctl-alerts\n") || forNow() != rendered {
		t.Errorf("update back to the file: exit %d, for %q (want %q)\n%s%s", code, forNow(), rendered, out, errOut)
	}
}
