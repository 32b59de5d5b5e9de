package bundle_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
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
