package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/statuswriter"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestMigrateToClusterVIPs: a running cluster whose live config is the
// vipctl-config ConfigMap moves to its ClusterVIPs object with `vipctl
// migrate` (an object applied before with another spec taken over) while the API VIP and a Service's
// VIP answer every request; afterwards an edit of the object alone (as
// `oc edit` makes) reaches every sidecar and the allocator, `vipctl
// update` writes the object and keeps the ConfigMap its copy, and
// `--revert` hands the live config back to the ConfigMap, again without a
// failed request.
func TestMigrateToClusterVIPs(t *testing.T) {
	file := clusterYAML("fast", "unicast", sidecarPools)
	kc := lab.StartKube(t, file, sidecarSpecs())
	kc.Deploy(t)
	kc.API.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	for _, n := range sidecarSpecs() {
		kc.AddNode(t, n.Name)
	}
	for _, n := range kc.Nodes {
		kc.StartSidecar(t, n.Name)
	}
	ctx := context.Background()
	admin := kc.API.AdminConfig()
	kubeconfig, path := updateFiles(t, kc.API, file)

	kc.CreateLBService(t, "web", "")
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the service VIP", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}
	kc.Settled(apiVIP)
	api := kc.Poll("https://"+apiVIP+":6443/", 20*time.Millisecond)
	svc := kc.Poll("http://198.51.100.128:8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "both VIPs answering", func() bool {
		a, _ := api.Counts()
		s, _ := svc.Counts()
		return a > 5 && s > 5
	})
	failures := func(what string) {
		t.Helper()
		if _, f := api.Counts(); f > 0 {
			t.Errorf("%s: %d failed requests to the API VIP", what, f)
		}
		if _, f := svc.Counts(); f > 0 {
			t.Errorf("%s: %d failed requests to the Service VIP", what, f)
		}
	}

	// An object applied before, to try the schema, with another spec:
	// no node reads it, and the migration replaces its spec with the
	// ConfigMap's.
	lab.CreateClusterVIPs(t, admin, clusterYAML("fast", "unicast", ""))

	code, out, errOut := vipctl(t, "migrate", "--kubeconfig", kubeconfig, "--wait", "60s")
	if code != 0 || !strings.Contains(errOut, "every node (4) reads the ClusterVIPs object") {
		nodes, _ := kc.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			t.Logf("%s: %s=%q", n.Name, v1alpha1.AnnotationNodeConfig, n.Annotations[v1alpha1.AnnotationNodeConfig])
		}
		t.Logf("status: %+v", lab.ClusterVIPs(t, admin, "lab").Status)
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	failures("vipctl migrate")
	if pools := lab.ClusterVIPs(t, admin, "lab").Spec.ServicePools; len(pools) != 1 || pools[0].Name != "web" || !strings.Contains(errOut, "its spec before was only reported on") {
		t.Errorf("the object applied before: pools %+v after the migration, want the ConfigMap's web\n%s", pools, errOut)
	}
	for _, sc := range kc.Sidecars {
		if !strings.Contains(sc.Log.String(), "following the ClusterVIPs object lab") {
			t.Errorf("a sidecar does not say it follows the object:\n%s", sc.Log.Tail(20))
		}
	}

	// The object is the live config: a range added to it alone reaches
	// the allocator and the pool's nodes, the ConfigMap unchanged.
	cmBefore := liveConfigMap(t, kc)
	dyn := dynamic.NewForConfigOrDie(admin)
	if _, err := dyn.Resource(crd.Resource).Patch(ctx, "lab", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/servicePools/0/addresses/-","value":"198.51.100.200-198.51.100.210"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.CreateLBService(t, "web2", "198.51.100.201")
	waitServiceIPs(t, kc.Admin, "default", "web2", 1)
	kc.WaitConf(t, "worker-1", "the object's new range", func(c string) bool { return strings.Contains(c, "198.51.100.201/32") })
	if liveConfigMap(t, kc) != cmBefore {
		t.Error("an edit of the object changed the ConfigMap")
	}
	failures("an edit of the object")
	invalidObjectEdit(t, kc, dyn)

	// vipctl update plans against the object, writes it and brings the
	// ConfigMap's copy along. The file does not have the range the object
	// got: the update takes it away again, which web2 holds, so --force.
	code, out, errOut = vipctl(t, "update", "-f", path, "--kubeconfig", kubeconfig, "--add-pool", "extra=198.51.100.64/27", "--force")
	if code != 0 || !strings.Contains(errOut+out, "wrote ClusterVIPs lab") {
		t.Fatalf("update on a migrated cluster: exit %d\n%s%s", code, out, errOut)
	}
	obj := lab.ClusterVIPs(t, admin, "lab")
	if len(obj.Spec.ServicePools) != 2 || obj.Spec.ServicePools[1].Name != "extra" {
		t.Errorf("the object after the update: pools %+v, want web and extra", obj.Spec.ServicePools)
	}
	if cm := liveConfigMap(t, kc); !strings.Contains(cm, "extra") || strings.Contains(cm, "198.51.100.200") {
		t.Errorf("the ConfigMap is no copy of the object after the update:\n%s", cm)
	}
	kc.WaitConf(t, "master-0", "the pool the update added", func(c string) bool { return strings.Contains(c, "pool_extra") })

	code, out, errOut = vipctl(t, "migrate", "--revert", "--kubeconfig", kubeconfig, "--wait", "60s")
	if code != 0 || !strings.Contains(errOut, "every node (4) reads the ConfigMap") {
		t.Fatalf("migrate --revert: exit %d\n%s%s", code, out, errOut)
	}
	failures("vipctl migrate --revert")
	a, _ := api.Stop()
	s, _ := svc.Stop()
	t.Logf("%d requests to the API VIP, %d to the Service VIP", a, s)
}

func liveConfigMap(t *testing.T, kc *lab.KubeCluster) string {
	t.Helper()
	cm, err := kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Get(context.Background(), v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[v1alpha1.ConfigMapKey]
}

// invalidObjectEdit: an edit of the live object that the apiserver takes
// and vipctl refuses (a pool range holding the API and ingress VIPs:
// docs/api.md, "What only vipctl validate checks") leaves the last valid
// pools in force, and says so
// where `oc describe clustervips lab` shows it: a Warning Event on the
// object, from the allocator, with the field path, and Degraded in its
// status. Taking the range out again clears the status.
func invalidObjectEdit(t *testing.T, kc *lab.KubeCluster, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	patch := func(op string) {
		t.Helper()
		if _, err := dyn.Resource(crd.Resource).Patch(ctx, "lab", types.JSONPatchType, []byte(op), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`[{"op":"add","path":"/spec/servicePools/0/addresses/-","value":"198.51.100.4-198.51.100.6"}]`)
	uid := lab.ClusterVIPs(t, kc.API.AdminConfig(), "lab").UID
	const field = "spec.servicePools[0].addresses[2]"
	var seen []string
	if !lab.WaitUntil(30*time.Second, func() bool {
		evs, err := kc.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=lab"})
		if err != nil {
			seen = []string{err.Error()}
			return false
		}
		seen = seen[:0]
		for _, ev := range evs.Items {
			seen = append(seen, ev.Namespace+" "+ev.InvolvedObject.Kind+" "+ev.Type+" "+ev.Reason+" "+string(ev.InvolvedObject.UID)+": "+ev.Message)
			if ev.Namespace == metav1.NamespaceDefault && ev.InvolvedObject.Kind == v1alpha1.Kind && ev.Type == "Warning" &&
				ev.Reason == "InvalidConfig" && ev.InvolvedObject.UID == uid && strings.Contains(ev.Message, field) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no Warning InvalidConfig Event on clustervips lab (in default, with its UID %s) naming %s within 30s; its Events: %q", uid, field, seen)
	}
	lab.WaitClusterVIPsStatus(t, kc.API.AdminConfig(), "lab", "Degraded "+statuswriter.ReasonInvalidSpec+" at "+field, func(s crd.ClusterVIPsStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, crd.ConditionDegraded)
		return c != nil && c.Reason == statuswriter.ReasonInvalidSpec && strings.Contains(c.Message, field)
	})
	patch(`[{"op":"remove","path":"/spec/servicePools/0/addresses/2"}]`)
	lab.WaitClusterVIPsStatus(t, kc.API.AdminConfig(), "lab", "Degraded no longer "+statuswriter.ReasonInvalidSpec, func(s crd.ClusterVIPsStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, crd.ConditionDegraded)
		return c != nil && c.Reason != statuswriter.ReasonInvalidSpec
	})
	t.Logf("the refused edit: Events %q", seen)
}
