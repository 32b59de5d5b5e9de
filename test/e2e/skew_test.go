package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/hack/releases"
	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/previousrelease"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// The version-skew tests (docs/upgrade.md, "Version skew"): a cluster in
// the middle of an upgrade or a rollback, its nodes running two releases
// side by side, the previous one (test/previousrelease: built from this
// clone's history) and this tree. Each writer of the objects two releases
// share (the vipctl-config ConfigMap, the nodes' annotations, the nodes'
// cluster.yaml, the Services' addresses) meets a reader of the other
// release, and every reader keeps working.

const skewPools = `  servicePools:
    - name: web
      addresses: [198.51.100.128/27]
      nodeSelector: {pool: web}
`

// The addresses the tests' Services ask for: one of the web pool (on the
// workers), one of the pool `vipctl update` adds (every node).
const (
	skewWebVIP   = "198.51.100.130"
	skewExtraVIP = "198.51.100.165"
	skewAddPool  = "extra=198.51.100.160/28"
)

// The nodes: of each role one runs the previous release, one this tree.
var (
	skewPrevious = []string{"master-0", "worker-0"}
	skewThis     = []string{"master-1", "worker-1"}
)

func skewSpecs() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true},
		{Name: "master-1", Addr: "198.51.100.12/24", ControlPlane: true},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}},
		{Name: "worker-1", Addr: "198.51.100.22/24", Labels: map[string]string{"pool": "web"}},
	}
}

// skewLab is a lab cluster with the real apiserver whose nodes run two
// releases.
type skewLab struct {
	kc *lab.KubeCluster
	// previous is the previous release's vipctl.
	previous string
	// kubeconfig is the administrator's, file the cluster file as the
	// administrator keeps it.
	kubeconfig, file string
	// sidecars are the previous release's sidecar processes, by node.
	sidecars map[string]*benchProc
	// allocator is this tree's allocator, when it runs.
	allocator *lab.Allocator
}

// skewAgainst names another release than the recorded previous one to
// run beside this tree: a build before tolerant reading, or a candidate.
var skewAgainst = flag.String("skew-previous", "", "with TestSkew*: the release to run beside this tree, VERSION@COMMIT (default: the newest in hack/releases.txt)")

// previousVipctl is the previous release's vipctl, built from this
// clone's history (cached by commit in bin/previous/).
func previousVipctl(t testing.TB) string {
	t.Helper()
	root := fixture.Repo("")
	r, err := previousrelease.Find(root)
	if err != nil {
		t.Fatal(err)
	}
	if *skewAgainst != "" {
		v, c, ok := strings.Cut(*skewAgainst, "@")
		if !ok {
			t.Fatalf("-skew-previous %q: want VERSION@COMMIT", *skewAgainst)
		}
		r = releases.Release{Version: v, Commit: c}
	}
	bin, err := previousrelease.Binary(root, r)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startSkewLab starts the cluster with the config written by one release
// (writer: "previous" or "this"): that release's `vipctl render`
// manifests applied as `oc apply -f out/manifests/vipctl.yaml` would, and
// then its `vipctl update --add-pool`. Each node's cluster.yaml is its own
// release's render of the same file, as its MachineConfig lays it down.
// The allocator is the other release's unless allocatorOf says.
func startSkewLab(t *testing.T, writer, allocatorOf string) *skewLab {
	t.Helper()
	base := clusterYAML("fast", "unicast", skewPools)
	s := &skewLab{kc: lab.StartKube(t, base, skewSpecs()), previous: previousVipctl(t), sidecars: map[string]*benchProc{}}
	kc := s.kc
	kc.API.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	s.kubeconfig, s.file = updateFiles(t, kc.API, base)

	// Each release's render of the file.
	dir := t.TempDir()
	prevOut, thisOut := filepath.Join(dir, "previous"), filepath.Join(dir, "this")
	s.runPrevious(t, "render", "-f", s.file, "--out-dir", prevOut)
	if code, _, errOut := vipctl(t, "render", "-f", s.file, "--out-dir", thisOut); code != 0 {
		t.Fatalf("render: exit %d: %s", code, errOut)
	}
	written := map[string]string{"previous": prevOut, "this": thisOut}[writer]
	applyManifestFile(t, kc, filepath.Join(written, "manifests", "vipctl.yaml"))
	// The nodes' cluster.yaml: the one render ships to the nodes, which
	// is also what it writes into the ConfigMap.
	prevStatic := filepath.Join(dir, "previous-cluster.yaml")
	writeFile(t, prevStatic, []byte(configMapData(t, filepath.Join(prevOut, "manifests", "vipctl.yaml"))))
	writeFile(t, kc.ConfigPath, []byte(configMapData(t, filepath.Join(thisOut, "manifests", "vipctl.yaml"))))

	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
	}
	for _, name := range skewPrevious {
		n := kc.ByName[name]
		kubeconfig := filepath.Join(dir, name+".kubeconfig")
		testapiserver.WriteKubeconfig(t, kc.API.NodeConfig(t, name), kubeconfig)
		n.StopLocal() // the sidecar keeps the VIPs local from now on
		s.sidecars[name] = startProcess(t, s.previous, "runtimecfg", "--config", prevStatic,
			"--bootstrap-nodes", n.Target.Path(onnode.BootstrapNodesPath), "--node-name", name, "--kubeconfig", kubeconfig,
			"--listen", "", "--metrics-listen", "", "--root", n.Target.Root, "--netns", n.Host.NS)
	}
	for _, name := range skewThis {
		kc.StartSidecar(t, name)
	}
	token := lab.AllocatorToken(t, kc.Admin)
	if allocatorOf == "this" {
		s.allocator = lab.StartAllocator(t, kc.API, token, "allocator-0")
	} else {
		kubeconfig := filepath.Join(dir, "allocator.kubeconfig")
		testapiserver.WriteKubeconfig(t, kc.API.TokenConfig(token), kubeconfig)
		startProcess(t, s.previous, "allocator", "--kubeconfig", kubeconfig, "--id", "allocator-0", "--listen", "", "--metrics-listen", "")
	}

	// A day-2 edit by the writer's `vipctl update`.
	if writer == "previous" {
		s.runPrevious(t, "update", "-f", s.file, "--add-pool", skewAddPool, "--kubeconfig", s.kubeconfig)
	} else if code, out, errOut := vipctl(t, "update", "-f", s.file, "--add-pool", skewAddPool, "--kubeconfig", s.kubeconfig); code != 0 {
		t.Fatalf("update: exit %d:\n%s%s", code, out, errOut)
	}
	return s
}

// runPrevious runs the previous release's vipctl to its end; it must
// succeed.
func (s *skewLab) runPrevious(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(s.previous, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("previous vipctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// servesEverywhere creates a Service in each pool and waits until every
// node that may hold its address renders it: the pool `vipctl update`
// added on every node, the web pool on the workers. It proves the
// allocator allocates and each sidecar renders from the ConfigMap.
func (s *skewLab) servesEverywhere(t *testing.T) {
	t.Helper()
	s.kc.CreateLBService(t, "web", skewWebVIP)
	s.kc.CreateLBService(t, "extra", skewExtraVIP)
	for _, n := range s.kc.Nodes {
		s.kc.WaitConf(t, n.Name, "the added pool's Service address", func(c string) bool { return strings.Contains(c, skewExtraVIP+"/32") })
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		s.kc.WaitConf(t, w, "the web pool's Service address", func(c string) bool { return strings.Contains(c, skewWebVIP+"/32") })
	}
	for name, p := range s.sidecars {
		if p.Exited() {
			t.Fatalf("the previous release's sidecar on %s exited:\n%s", name, p.LogTail(30))
		}
	}
}

// statusesAgree waits until `vipctl status` of both releases exits 0 (the
// API VIP and every Service address held by exactly one node), without a
// warning (every node's vipctl.io/vips annotation read), with the same
// holders; and checks that every node published its annotation. The
// holders are the nodes of both releases, so each release's status reads
// what each release's sidecars publish.
func (s *skewLab) statusesAgree(t *testing.T) {
	t.Helper()
	var last string
	ok := lab.WaitUntil(60*time.Second, func() bool {
		code, out, errOut := vipctl(t, "status", "-o", "json", "--kubeconfig", s.kubeconfig)
		cmd := exec.Command(s.previous, "status", "-o", "json", "--kubeconfig", s.kubeconfig)
		var prevOut, prevErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &prevOut, &prevErr
		prevErrRun := cmd.Run()
		last = fmt.Sprintf("this tree: exit %d\n%s%sprevious: %v\n%s%s", code, out, errOut, prevErrRun, prevOut.String(), prevErr.String())
		if code != 0 || prevErrRun != nil || errOut != "" || prevErr.Len() > 0 {
			return false
		}
		return reflect.DeepEqual(holders(t, out), holders(t, prevOut.String()))
	})
	if !ok {
		t.Fatalf("the two releases' vipctl status never agreed on a settled cluster; last:\n%s", last)
	}
	for _, n := range s.kc.Nodes {
		node, err := s.kc.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := node.Annotations[v1alpha1.AnnotationNodeVIPs]
		if _, err := v1alpha1.ParseHeldVIPs(v); !ok || err != nil {
			t.Errorf("%s: annotation %s %q (present %v): %v", n.Name, v1alpha1.AnnotationNodeVIPs, v, ok, err)
		}
	}
}

// holders maps each VIP of a `vipctl status -o json` to its holders.
func holders(t *testing.T, out string) map[string][]string {
	t.Helper()
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, v := range r.VIPs {
		m[v.Address] = slices.Sorted(slices.Values(v.Holders))
	}
	return m
}

// TestSkewPreviousSidecarReadsThisConfig: the ConfigMap written by this
// tree's render and update, read by the previous release's sidecars
// (beside this tree's), with this tree's allocator writing the Services'
// addresses: every sidecar renders the pool update added and the
// Services' addresses, and the status of both releases reads what the
// sidecars of both publish. Then the next release's ConfigMap, with a
// field no release knows yet: this tree's sidecars and allocator read on,
// say so and allocate from it, `vipctl update` refuses to write over it,
// and the previous release's sidecars keep serving.
func TestSkewPreviousSidecarReadsThisConfig(t *testing.T) {
	s := startSkewLab(t, "this", "this")
	s.servesEverywhere(t)
	s.statusesAgree(t)
	s.migrateRefused(t)

	// The next release's ConfigMap: a field of a pool this tree does not
	// know, and a new range of the added pool.
	ctx := context.Background()
	cms := s.kc.Admin.CoreV1().ConfigMaps(onnode.Namespace)
	cm, err := cms.Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := cm.Data[v1alpha1.ConfigMapKey]
	next := strings.Replace(data, "- 198.51.100.160/28\n", "- 198.51.100.160/28\n    - 198.51.100.176/28\n    futureKnob: 3\n", 1)
	if next == data {
		t.Fatalf("the ConfigMap has no pool 198.51.100.160/28:\n%s", data)
	}
	cm.Data[v1alpha1.ConfigMapKey] = next
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const nextVIP = "198.51.100.180"
	s.kc.CreateLBService(t, "next", nextVIP)
	for _, name := range skewThis {
		s.kc.WaitConf(t, name, "the new range's Service address", func(c string) bool { return strings.Contains(c, nextVIP+"/32") })
	}
	lab.WaitFor(t, 15*time.Second, "the allocator's config_unknown_fields 1", func() bool {
		return testutil.ToFloat64(s.allocator.Metrics.UnknownFields) == 1
	})
	waitEventNaming(t, s.kc, "involvedObject.name="+v1alpha1.ConfigMapName+",reason="+allocator.ReasonConfigFieldsUnknown, "spec.servicePools[1].futureKnob")
	for _, name := range skewThis {
		m := s.kc.Sidecars[name].Metrics
		lab.WaitFor(t, 15*time.Second, name+"'s config_unknown_fields{object=configmap} 1", func() bool {
			return testutil.ToFloat64(m.UnknownFields.WithLabelValues("configmap")) == 1
		})
		waitEventNaming(t, s.kc, "involvedObject.name="+name+",reason="+sidecar.ReasonConfigFieldsUnknown, "spec.servicePools[1].futureKnob")
	}
	if code, _, errOut := vipctl(t, "status", "--kubeconfig", s.kubeconfig); !strings.Contains(errOut, "warning: configmap vipctl-system/vipctl-config: fields this vipctl does not know (written by a newer one), ignored: spec.servicePools[1].futureKnob") {
		t.Errorf("status (exit %d) does not warn of the unknown field:\n%s", code, errOut)
	}
	code, _, errOut := vipctl(t, "update", "-f", s.file, "--set-pool", "extra=198.51.100.160/28", "--kubeconfig", s.kubeconfig)
	if code != 1 || !strings.Contains(errOut, "was written by a newer vipctl than this one") || !strings.Contains(errOut, "spec.servicePools[1].futureKnob") {
		t.Errorf("update over the newer ConfigMap: exit %d:\n%s", code, errOut)
	}
	// The previous release's sidecars keep working: one that reads stored
	// copies tolerantly (v0.1.0 on) takes the new range, an older one
	// keeps its last good config; neither drops what it serves.
	for _, name := range skewPrevious {
		p := s.sidecars[name]
		var conf string
		took := func() bool { conf = s.kc.KeepalivedConf(t, name); return strings.Contains(conf, nextVIP+"/32") }
		refused := func() bool { return strings.Contains(p.log.String(), "futureKnob") }
		if !lab.WaitUntil(15*time.Second, func() bool { return took() || refused() }) {
			t.Errorf("%s: the previous release's sidecar neither took the next release's ConfigMap nor refused it; its log:\n%s\nkeepalived.conf:\n%s",
				name, p.LogTail(20), conf)
			continue
		}
		t.Logf("%s: the previous release's sidecar took the new range: %v (refused the ConfigMap: %v)", name, took(), refused())
		if !strings.Contains(s.kc.KeepalivedConf(t, name), skewExtraVIP+"/32") || p.Exited() {
			t.Errorf("%s: the previous release's sidecar dropped a Service address it served (exited: %v)", name, p.Exited())
		}
	}
}

// migrateRefused: `vipctl migrate` while the previous release's
// sidecars (before v0.2.0, ConfigMap only) run is refused, naming their
// nodes, before anything is written: no ClusterVIPs object, the
// ConfigMap not marked.
func (s *skewLab) migrateRefused(t *testing.T) {
	t.Helper()
	code, out, errOut := vipctl(t, "migrate", "--kubeconfig", s.kubeconfig, "--wait", "30s")
	want := strings.Join(skewPrevious, ", ") + " run a vipctl sidecar older than v0.2.0"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("vipctl migrate with the previous release's sidecars: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	ctx := context.Background()
	cm, err := s.kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := cm.Annotations[v1alpha1.AnnotationConfigSource]; ok {
		t.Errorf("the refused migration marked the ConfigMap %s=%q", v1alpha1.AnnotationConfigSource, v)
	}
	_, err = dynamic.NewForConfigOrDie(s.kc.API.AdminConfig()).Resource(crd.Resource).Get(ctx, "lab", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the refused migration left a ClusterVIPs object (or the lookup failed): %v", err)
	}
}

// TestSkewThisSidecarReadsPreviousConfig: the ConfigMap written by the
// previous release's render and update, and the previous release's
// allocator beside it, read by this tree's sidecars (beside the previous
// release's): every sidecar renders the added pool and the Services'
// addresses the previous allocator wrote, and the status of both
// releases reads what the sidecars of both publish.
func TestSkewThisSidecarReadsPreviousConfig(t *testing.T) {
	s := startSkewLab(t, "previous", "previous")
	s.servesEverywhere(t)
	s.statusesAgree(t)
	for _, name := range skewThis {
		sc := s.kc.Sidecars[name]
		if got := testutil.ToFloat64(sc.Metrics.ConfigInvalid); got != 0 {
			t.Errorf("%s: config_invalid %v reading the previous release's ConfigMap", name, got)
		}
	}
}

// waitEventNaming waits for an Event matching selector whose message holds
// want.
func waitEventNaming(t *testing.T, kc *lab.KubeCluster, selector, want string) {
	t.Helper()
	lab.WaitFor(t, 15*time.Second, "an Event "+selector+" naming "+want, func() bool {
		evs, err := kc.Admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool { return strings.Contains(ev.Message, want) })
	})
}

// applyManifestFile creates every object of a manifest file render wrote,
// as `oc apply -f` would on a cluster that has none of them; a namespace
// that exists already is left as it is.
func applyManifestFile(t *testing.T, kc *lab.KubeCluster, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resources := lab.Resources(kc.API.AdminConfig())
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		_, err := resources(t, &obj).Create(context.Background(), &obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && obj.GetKind() == "Namespace" {
			continue // StartKube made it
		}
		if err != nil {
			t.Fatalf("%s: %s %s: %v", path, obj.GetKind(), obj.GetName(), err)
		}
	}
}

// configMapData is the cluster file in the vipctl-config ConfigMap of a
// manifest file render wrote.
func configMapData(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			t.Fatalf("%s: no ConfigMap %s: %v", path, v1alpha1.ConfigMapName, err)
		}
		if obj.GetKind() == "ConfigMap" && obj.GetName() == v1alpha1.ConfigMapName {
			data, _, _ := unstructured.NestedString(obj.Object, "data", v1alpha1.ConfigMapKey)
			return data
		}
	}
}
