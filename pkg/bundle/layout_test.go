package bundle_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/manifests"
)

// TestNodeFilesAtNodePaths: with --nodes, DIR/nodes/<node>/ holds each
// file where it lies on the node, FRR's config included: the pods see it
// as /etc/frr/frr.conf, but the node keeps it in /var/lib/vipctl/frr (on
// main it was written as nodes/<node>/etc/frr/frr.conf, a path the node
// never has).
func TestNodeFilesAtNodePaths(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "bgp-two-racks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "racks.yaml"), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.Build(c, bundle.Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	n := nodes[0].Name
	for _, want := range []string{
		"nodes/" + n + "/etc/vipctl-keepalived/keepalived.conf",
		"nodes/" + n + "/var/lib/vipctl/frr/frr.conf",
		"nodes/" + n + "/etc/vipctl/scripts/check-http.sh",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("no %s among %v", want, paths)
		}
	}
	if slices.Contains(paths, "nodes/"+n+"/etc/frr/frr.conf") {
		t.Errorf("frr.conf written at the pods' path /etc/frr/frr.conf")
	}
}

// TestDNSFilesOnlyWithVIPs: render writes dns/ for a cluster whose API and
// ingress VIPs vipctl holds, and none in mode poolsOnly, whose VIPs are
// OpenShift's and not in the file (empty record files there would read
// as "this cluster needs no records").
func TestDNSFilesOnlyWithVIPs(t *testing.T) {
	t.Parallel()
	for example, want := range map[string]bool{"compact-ipv4.yaml": true, "pools-only.yaml": false} {
		c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", example))
		if err != nil {
			t.Fatal(err)
		}
		files, err := bundle.Build(c, bundle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(files, func(f bundle.File) bool { return f.Path == bundle.DNSZonePath })
		if got != want {
			t.Errorf("%s: %s written: %v, want %v", example, bundle.DNSZonePath, got, want)
		}
	}
}

// TestGrafanaDashboardWritten: render writes the Grafana flavor of the
// dashboard for every monitoring stack, none included, outside
// manifests/ (which `oc apply -f` reads whole), as JSON Grafana imports.
func TestGrafanaDashboardWritten(t *testing.T) {
	t.Parallel()
	for _, stack := range []string{v1alpha1.MonitoringOpenShift, v1alpha1.MonitoringPrometheusOperator, v1alpha1.MonitoringNone} {
		c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "compact-ipv4.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.Monitoring = &v1alpha1.MonitoringSpec{Stack: stack}
		files, err := bundle.Build(c, bundle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(files, func(f bundle.File) bool { return f.Path == bundle.GrafanaDashboardPath })
		if i < 0 {
			t.Errorf("%s: no %s", stack, bundle.GrafanaDashboardPath)
			continue
		}
		var d manifests.Dashboard
		if err := json.Unmarshal(files[i].Data, &d); err != nil {
			t.Fatalf("%s: %v", bundle.GrafanaDashboardPath, err)
		}
		if want := manifests.NewDashboard(manifests.GrafanaFlavor); !reflect.DeepEqual(d, want) {
			t.Errorf("%s: %s is not the Grafana flavor of the dashboard", stack, bundle.GrafanaDashboardPath)
		}
		if strings.HasPrefix(bundle.GrafanaDashboardPath, "manifests/") {
			t.Errorf("%s lies where oc apply -f DIR/manifests/ reads it as an object", bundle.GrafanaDashboardPath)
		}
	}
}

// TestClusterVIPsWritten: for every example, render writes the ClusterVIPs
// CRD (the generated one) and the cluster's object, outside manifests/
// (one `oc apply` cannot create a CRD and its object), annotated as the
// live config, whose spec reads back, as the sidecars read it, as the
// same config as the ConfigMap's copy.
func TestClusterVIPsWritten(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, p := range paths {
		c, err := v1alpha1.Load(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		files, err := bundle.Build(c, bundle.Options{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		byPath := map[string][]byte{}
		for _, f := range files {
			byPath[f.Path] = f.Data
		}
		if !slices.Equal(byPath[bundle.ClusterVIPsCRDPath], manifests.ClusterVIPsCRD()) {
			t.Errorf("%s: %s is not the generated CRD", p, bundle.ClusterVIPsCRDPath)
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(byPath[bundle.ClusterVIPsObjectPath], &obj.Object); err != nil {
			t.Fatalf("%s: %s: %v", p, bundle.ClusterVIPsObjectPath, err)
		}
		if obj.GetAnnotations()[v1alpha1.AnnotationConfigSource] != "true" || obj.GetName() != c.Metadata.Name {
			t.Errorf("%s: object %s annotations %v, want %s marked as the live config", p, obj.GetName(), obj.GetAnnotations(), c.Metadata.Name)
		}
		read, err := configsource.Read(&obj)
		if err != nil {
			t.Fatalf("%s: the object does not read back: %v", p, err)
		}
		want, _ := c.ShippedYAML()
		if got, _ := read.ShippedYAML(); string(got) != string(want) {
			t.Errorf("%s: the object reads back as\n%s\nwant the ConfigMap's\n%s", p, got, want)
		}
	}
	for _, path := range []string{bundle.ClusterVIPsCRDPath, bundle.ClusterVIPsObjectPath} {
		if strings.HasPrefix(path, "manifests/") {
			t.Errorf("%s lies where oc apply -f DIR/manifests/ creates it with the CRD", path)
		}
	}
}
