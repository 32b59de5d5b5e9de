package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestMonitoringObjectsAccepted: manifests/monitoring.yaml, for OpenShift's
// cluster monitoring and for a plain prometheus-operator, is accepted by a
// real kube-apiserver with prometheus-operator's own CRDs (from its Go
// module, at the release of the types vipctl builds them with), and
// nothing of it is pruned as unknown: what the apiserver stores holds
// every field vipctl wrote, so Prometheus sees the scrape settings as
// rendered; for OpenShift the console's dashboard, a ConfigMap in
// openshift-config-managed, is stored as written.
func TestMonitoringObjectsAccepted(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	api := testapiserver.Start(t)
	api.InstallCRDs(t, testapiserver.PrometheusOperatorCRDs(t, "servicemonitors", "prometheusrules")...)
	resource := lab.Resources(api.AdminConfig())
	ctx := context.Background()
	// Every OpenShift cluster has the namespace the console reads its
	// dashboards from; the dashboard's ConfigMap goes there.
	if _, err := kubernetes.NewForConfigOrDie(api.AdminConfig()).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: manifests.ConsoleDashboardNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, stack := range []string{v1alpha1.MonitoringOpenShift, v1alpha1.MonitoringPrometheusOperator} {
		c := fixture.Example(t, "compact-ipv4.yaml")
		c.Spec.Monitoring = &v1alpha1.MonitoringSpec{Stack: stack, Labels: map[string]string{"release": "kps"}}
		objs := manifests.Monitoring(c)
		kinds := map[string]int{}
		for _, o := range objs {
			sent := toUnstructured(t, o)
			gvk := sent.GroupVersionKind()
			kinds[gvk.Kind]++
			data, err := json.Marshal(sent.Object)
			if err != nil {
				t.Fatal(err)
			}
			// Server-side apply: the second stack's objects replace the
			// first's, and are validated as updates.
			got, err := resource(t, sent).Patch(ctx, sent.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "vipctl-test", Force: ptr.To(true)})
			if err != nil {
				t.Errorf("%s: %s %s refused: %v", stack, gvk.Kind, sent.GetName(), err)
				continue
			}
			stored := toUnstructured(t, got)
			for _, part := range []string{"spec", "rules", "roleRef", "subjects", "data"} {
				if want, ok := sent.Object[part]; ok {
					if path := missing(stored.Object[part], want, part); path != "" {
						t.Errorf("%s: %s %s: the apiserver dropped or changed %s", stack, gvk.Kind, sent.GetName(), path)
					}
				}
			}
		}
		dashboards := 0
		if stack == v1alpha1.MonitoringOpenShift {
			dashboards = 1
		}
		if kinds["ServiceMonitor"] != 2 || kinds["PrometheusRule"] != 1 || kinds["ConfigMap"] != dashboards {
			t.Errorf("%s: %v, want 2 ServiceMonitors, a PrometheusRule and %d dashboard ConfigMaps", stack, kinds, dashboards)
		}
	}
}

func toUnstructured(t *testing.T, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, numbers as float64: what was sent and what the
	// apiserver stored compare alike.
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &out.Object); err != nil {
		t.Fatal(err)
	}
	return out
}

// missing is the path of the first value of want that got lacks or has
// otherwise ("" when got holds all of want; got may hold more: defaults).
func missing(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range w {
			if p := missing(g[k], v, path+"."+k); p != "" {
				return p
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if p := missing(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(got, want) {
			return path
		}
		return ""
	}
}
