package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestUpdateBringsClusterVIPsCRDInLine: `vipctl update` brings the
// ClusterVIPs CRD of a cluster that has it to this release's schema (an
// older one would have the apiserver prune the fields this release
// writes), and adds none to a cluster that never took the API on. The
// older CRD stands for an earlier build's: this one without the printer
// columns, the status totals and a spec field added since. On a cluster
// on the object the update writes that field, which only the new schema
// keeps: the CRD goes first.
func TestUpdateBringsClusterVIPsCRDInLine(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	e.api.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(args ...string) (int, string, string) {
		return vipctl(t, append(args, "--kubeconfig", kubeconfig)...)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || strings.Contains(out, "CustomResourceDefinition") {
		t.Fatalf("update without the CRD: exit %d, want no CRD added\n%s%s", code, out, errOut)
	}

	var older unstructured.Unstructured
	if err := yaml.Unmarshal(manifests.ClusterVIPsCRD(), &older.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(older.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	delete(v, "additionalPrinterColumns")
	unstructured.RemoveNestedField(v, "schema", "openAPIV3Schema", "properties", "status", "properties", "addressesFree")
	unstructured.RemoveNestedField(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "monitoring", "properties", "labels")
	_ = unstructured.SetNestedSlice(older.Object, versions, "spec", "versions")
	data, err := yaml.Marshal(older.Object)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "older-crd.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.api.InstallCRDs(t, path)
	// The cluster on the object, which the update writes with a field
	// the older schema lacks.
	if code, out, errOut := run("migrate", "--wait", "0s"); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	edited := strings.Replace(base, "  vrrp: {", "  monitoring: {labels: {team: net}}\n  vrrp: {", 1)
	if edited == base {
		t.Fatal("the cluster file has no vrrp line to edit")
	}
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run("update", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(out, "~ CustomResourceDefinition clustervips.vipctl.io\n") || !strings.Contains(out, "additionalPrinterColumns") {
		t.Fatalf("dry run with an older CRD: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || !strings.Contains(out+errOut, "applied CustomResourceDefinition clustervips.vipctl.io") {
		t.Fatalf("update with an older CRD: exit %d\n%s%s", code, out, errOut)
	}
	crds := dynamic.NewForConfigOrDie(e.api.AdminConfig()).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	live, err := crds.Get(context.Background(), "clustervips.vipctl.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ = unstructured.NestedSlice(live.Object, "spec", "versions")
	if _, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "status", "properties", "addressesFree"); !ok {
		t.Error("the CRD after the update lacks status.addressesFree")
	}
	obj := lab.ClusterVIPs(t, e.api.AdminConfig(), "lab")
	if m := obj.Spec.Monitoring; m == nil || m.Labels["team"] != "net" {
		t.Errorf("the object after the update: monitoring %+v, want labels team: net (the CRD applied before the object)", m)
	}
	if code, out, errOut := run("update", "-f", file); code != 0 || out != "no change\n" {
		t.Fatalf("update after the CRD was brought in line: exit %d\n%s%s", code, out, errOut)
	}
}
