package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/statuswriter"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
)

// TestDay1OnClusterVIPs: a cluster installed with what `vipctl render`
// writes for day 1 starts on the ClusterVIPs object, no migration. The
// files go where docs/install.md puts them, the installer's openshift/
// directory, whose objects the bootstrap creates again until each is
// created (lab.CreateAsBootstrap, as cluster-bootstrap does): the
// object's file name sorts before its CRD's there, so its first
// creation fails and a later pass creates it. Then the allocator and
// every node's sidecar (real keepalived) start: each reads the object,
// a Service gets an address of its pool and its nodes carry it, and the
// status says every node runs the object's spec (and, as `vipctl
// status` shows, exit 2, that only the ingress VIP lacks a holder: this
// lab runs no router).
func TestDay1OnClusterVIPs(t *testing.T) {
	file := clusterYAML("fast", "unicast", sidecarPools)
	kc := lab.StartKube(t, file, sidecarSpecs())
	out := filepath.Join(t.TempDir(), "out")
	if code, o, e := vipctl(t, "render", "-f", kc.ConfigPath, "--out-dir", out); code != 0 {
		t.Fatalf("render: exit %d\n%s%s", code, o, e)
	}
	var objs []runtime.Object
	for _, f := range []string{bundle.ClusterVIPsObjectPath, bundle.ClusterVIPsCRDPath, bundle.ManifestsPath} {
		objs = append(objs, fixture.ReadObjects(t, filepath.Join(out, f))...)
	}
	admin := kc.API.AdminConfig()
	passes := lab.CreateAsBootstrap(t, admin, objs, time.Minute)
	if passes < 2 {
		t.Errorf("every object created in %d pass: the object came before its CRD and should have failed once", passes)
	}
	t.Logf("the bootstrap's way created the %d objects in %d passes", len(objs), passes)

	lab.StartAllocator(t, kc.API, lab.AllocatorToken(t, kc.Admin), "allocator-0")
	for _, n := range sidecarSpecs() {
		kc.AddNode(t, n.Name)
	}
	for _, n := range kc.Nodes {
		kc.StartSidecar(t, n.Name)
	}
	kc.CreateLBService(t, "web", "")
	waitServiceIPs(t, kc.Admin, "default", "web", 1)
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the service VIP", func(c string) bool { return strings.Contains(c, "198.51.100.128/32") })
	}
	st := lab.WaitClusterVIPsStatus(t, admin, "lab", "every node on the object's spec", func(s crd.ClusterVIPsStatus) bool {
		if len(s.Nodes) != len(kc.Nodes) {
			return false
		}
		for _, n := range s.Nodes {
			if n.Source != v1alpha1.SourceObject || n.SpecDigest != s.SpecDigest {
				return false
			}
		}
		// Ready but for the ingress VIP: no router runs in this lab. The
		// API VIP is held once keepalived's Master_Down has passed
		// (3.6 s with the default profile): until then the status names
		// it too (rehearsal r44 asked before).
		c := meta.FindStatusCondition(s.Conditions, crd.ConditionReady)
		return c != nil && c.Reason != statuswriter.ReasonNodesBehind && !strings.Contains(c.Message, "198.51.100.5")
	})
	if len(st.Pools) != 1 || st.Pools[0].Name != "web" || st.Pools[0].InUse != 1 {
		t.Errorf("pools in the status: %+v, want web with 1 address in use", st.Pools)
	}
	for name, sc := range kc.Sidecars {
		if log := sc.Log.String(); !strings.Contains(log, "following the ClusterVIPs object lab") || strings.Contains(log, "no ClusterVIPs resource") {
			t.Errorf("%s: the sidecar did not find the object at once:\n%s", name, sc.Log.Tail(20))
		}
	}
	kubeconfig, _ := updateFiles(t, kc.API, file)
	if code, o, e := vipctl(t, "status", "--kubeconfig", kubeconfig); code != 2 || !strings.Contains(o, "ClusterVIPs lab, generation 1:\n  Ready=False  VIPsNotHeld: no holder: 198.51.100.6") {
		t.Errorf("vipctl status: exit %d\n%s%s", code, o, e)
	}
}
