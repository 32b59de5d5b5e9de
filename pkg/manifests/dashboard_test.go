package manifests_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/fixture"
)

// panelTypes are the panel types each flavor renders: the console's are
// those its dashboards page draws (it skips any other silently), Grafana's
// its React panels.
var panelTypes = map[manifests.DashboardFlavor][]string{
	manifests.ConsoleFlavor: {"row", "graph", "singlestat", "gauge", "table", "grafana-piechart-panel"},
	manifests.GrafanaFlavor: {"row", "timeseries", "stat"},
}

// TestDashboardQueries: every query of the dashboard, in both flavors,
// parses with Prometheus's own PromQL parser and selects only series the
// sidecar or the allocator export (taken from their NewMetrics, so a
// renamed metric fails here); every chart has a query and a type its
// renderer draws, and Grafana's panels lie inside its grid without
// overlapping.
func TestDashboardQueries(t *testing.T) {
	exported := exportedMetrics()
	for flavor, types := range panelTypes {
		d := manifests.NewDashboard(flavor)
		ids := map[int]bool{}
		var cells [][manifests.DashboardColumns]bool
		queries := 0
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("flavor %d: panel id %d twice", flavor, p.ID)
			}
			ids[p.ID] = true
			if !slices.Contains(types, p.Type) {
				t.Errorf("flavor %d: %q is a %s panel, which its renderer does not draw", flavor, p.Title, p.Type)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("flavor %d: %q has no query", flavor, p.Title)
			}
			for _, q := range p.Targets {
				queries++
				for _, err := range checkQuery(q.Expr, exported) {
					t.Errorf("flavor %d, %q: %v", flavor, p.Title, err)
				}
			}
			if g := p.GridPos; g != nil {
				if g.X < 0 || g.W <= 0 || g.X+g.W > manifests.DashboardColumns {
					t.Errorf("%q: gridPos %+v outside the grid", p.Title, *g)
					continue
				}
				for y := g.Y; y < g.Y+g.H; y++ {
					for len(cells) <= y {
						cells = append(cells, [manifests.DashboardColumns]bool{})
					}
					for x := g.X; x < g.X+g.W; x++ {
						if cells[y][x] {
							t.Errorf("%q: gridPos %+v overlaps another panel", p.Title, *g)
						}
						cells[y][x] = true
					}
				}
			}
		}
		if queries < 20 {
			t.Errorf("flavor %d: only %d queries", flavor, queries)
		}
		if (flavor == manifests.GrafanaFlavor) != (len(cells) > 0) {
			t.Errorf("flavor %d: gridPos on %d lines; Grafana's panels need one, the console's use span", flavor, len(cells))
		}
	}
}

// TestDashboardConfigMap: for OpenShift's stack, manifests/monitoring.yaml
// carries the dashboard as the console finds it (namespace, label) and
// reads it (the JSON of its one data value: the console takes the first),
// in the console's flavor; the other stacks have no console to show it.
func TestDashboardConfigMap(t *testing.T) {
	for _, stack := range []string{v1alpha1.MonitoringOpenShift, v1alpha1.MonitoringPrometheusOperator} {
		c := fixture.Example(t, "compact-ipv4.yaml")
		c.Spec.Monitoring = &v1alpha1.MonitoringSpec{Stack: stack}
		var found []*corev1.ConfigMap
		for _, o := range manifests.Monitoring(c) {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Labels[manifests.ConsoleDashboardLabel] != "" {
				found = append(found, cm)
			}
		}
		if stack != v1alpha1.MonitoringOpenShift {
			if len(found) != 0 {
				t.Errorf("%s: a console dashboard", stack)
			}
			continue
		}
		if len(found) != 1 {
			t.Fatalf("%s: %d console dashboards, want 1", stack, len(found))
		}
		cm := found[0]
		if cm.Namespace != "openshift-config-managed" || cm.Labels["console.openshift.io/dashboard"] != "true" {
			t.Errorf("ConfigMap %s/%s labels %v: not where the console looks", cm.Namespace, cm.Name, cm.Labels)
		}
		if len(cm.Data) != 1 || len(cm.BinaryData) != 0 {
			t.Fatalf("ConfigMap data keys %d, binary %d: want one", len(cm.Data), len(cm.BinaryData))
		}
		var got manifests.Dashboard
		if err := json.Unmarshal([]byte(cm.Data[manifests.DashboardKey]), &got); err != nil {
			t.Fatalf("data %s: %v", manifests.DashboardKey, err)
		}
		if want := manifests.NewDashboard(manifests.ConsoleFlavor); !reflect.DeepEqual(got, want) {
			t.Error("the ConfigMap's dashboard is not the console flavor")
		}
	}
}
