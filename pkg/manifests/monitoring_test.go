package manifests

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/golden"
)

// TestMonitoringGolden pins DIR/manifests/monitoring.yaml for OpenShift's
// cluster monitoring (the default) and for a plain prometheus-operator
// with its own ServiceAccount, selector labels and metrics port.
func TestMonitoringGolden(t *testing.T) {
	for name, mon := range map[string]*v1alpha1.MonitoringSpec{
		"openshift": nil,
		"prometheus-operator": {Stack: v1alpha1.MonitoringPrometheusOperator, Port: 9500,
			Prometheus: &v1alpha1.ServiceAccountRef{Namespace: "observability", Name: "prometheus"},
			Labels:     map[string]string{"release": "kps"}},
	} {
		c := fixture.Example(t, "compact-ipv4.yaml")
		c.Spec.Monitoring = mon
		data, err := Marshal(Monitoring(c))
		if err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, name, data)
	}
}

// TestMonitoringPort: spec.monitoring.port is where the sidecar and the
// allocator listen, what the keepalived pod declares as its host port and
// what the metrics Services point at; stack none writes no scrape objects
// and leaves the namespace without the cluster-monitoring label.
func TestMonitoringPort(t *testing.T) {
	c := fixture.Example(t, "compact-ipv4.yaml")
	c.Spec.Monitoring = &v1alpha1.MonitoringSpec{Stack: v1alpha1.MonitoringPrometheusOperator, Port: 9500}
	hasListen := func(args []string) bool {
		i := slices.Index(args, "--metrics-listen")
		return i >= 0 && i+1 < len(args) && args[i+1] == ":9500"
	}
	var containers []corev1.Container
	containers = append(containers, KeepalivedPod(c).Spec.Containers...)
	for _, o := range Allocator(c) {
		if d, ok := o.(*appsv1.Deployment); ok {
			containers = append(containers, d.Spec.Template.Spec.Containers...)
		}
	}
	n := 0
	for _, ct := range containers {
		if !slices.Contains(ct.Args, "--metrics-listen") {
			continue
		}
		n++
		if !hasListen(ct.Args) {
			t.Errorf("%s args %v: not --metrics-listen :9500", ct.Name, ct.Args)
		}
		i := slices.IndexFunc(ct.Ports, func(p corev1.ContainerPort) bool { return p.Name == metricsPortName })
		if i < 0 || ct.Ports[i].ContainerPort != 9500 {
			t.Errorf("%s ports %+v, want metrics on 9500", ct.Name, ct.Ports)
		}
		if ct.Name == containerRuntimecfg && (i < 0 || ct.Ports[i].HostPort != 9500) {
			t.Errorf("sidecar ports %+v, want host port 9500", ct.Ports)
		}
	}
	if n != 2 {
		t.Errorf("%d containers serve metrics, want the sidecar and the allocator", n)
	}
	for _, o := range Monitoring(c) {
		if svc, ok := o.(*corev1.Service); ok {
			if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 9500 || p[0].TargetPort.IntValue() != 9500 {
				t.Errorf("Service %s ports %+v, want 9500", svc.Name, p)
			}
		}
	}
	if ns := Namespace(c); ns.Labels[clusterMonitoringLabel] != "" {
		t.Errorf("prometheus-operator: namespace labelled %s", clusterMonitoringLabel)
	}

	c.Spec.Monitoring.Stack = v1alpha1.MonitoringNone
	if objs := Monitoring(c); len(objs) != 0 {
		t.Errorf("stack none: %d objects", len(objs))
	}
}
