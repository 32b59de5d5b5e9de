package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestMachineConfigsAcceptedByAPIServer renders every example and hands
// each MachineConfig to a real kube-apiserver that has the MachineConfig
// CRD from the openshift/api module: first a server-side dry run, then a
// real create whose stored object must read back unchanged.
func TestMachineConfigsAcceptedByAPIServer(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	srv := testapiserver.Start(t)
	srv.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	client, err := dynamic.NewForConfig(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	examples, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, ex := range examples {
		c, err := v1alpha1.Load(ex)
		if err != nil {
			t.Fatal(err)
		}
		opts := bundle.Options{}
		if !strings.Contains(ex, "node-groups") {
			nodes, err := cluster.LoadNodeListFile(nodeListFor(ex), "br-ex")
			if err != nil {
				t.Fatal(err)
			}
			opts.Nodes, opts.BootstrapNodes = nodes.Nodes, nodes.Objects
		}
		files, err := bundle.Build(c, opts)
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		for _, f := range files {
			if !strings.HasPrefix(f.Path, "machineconfigs/") {
				continue
			}
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal(f.Data, &obj.Object); err != nil {
				t.Fatalf("%s %s: %v", ex, f.Path, err)
			}
			// One cluster's objects at a time: names repeat across examples.
			obj.SetName(obj.GetName() + "-" + strings.TrimSuffix(filepath.Base(ex), ".yaml"))
			if _, err := client.Resource(machineconfig.GVR).Create(ctx, &obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s %s: dry-run create refused: %v", ex, f.Path, err)
				continue
			}
			created, err := client.Resource(machineconfig.GVR).Create(ctx, &obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err != nil {
				t.Errorf("%s %s: create refused: %v", ex, f.Path, err)
				continue
			}
			want, _, _ := unstructured.NestedMap(obj.Object, "spec", "config")
			got, _, _ := unstructured.NestedMap(created.Object, "spec", "config")
			if !equalJSON(t, want, got) {
				t.Errorf("%s %s: stored spec.config differs from what was sent", ex, f.Path)
			}
		}
	}
}

// TestMachineConfigsApplyAtScale is what an administrator of a 2000-node
// OpenShift cluster does: `oc get nodes -o json > nodes.json` (about 20 KB
// a Node: cached images, conditions, OVN and MCO annotations; JSON because
// writing 40 MB of YAML takes the test a minute), `vipctl render --nodes
// nodes.json`, `oc apply -f out/machineconfigs/`. Client-side
// apply stores the whole object again in its
// last-applied-configuration annotation, so each MachineConfig is created
// with that annotation on the real apiserver: the apiserver refuses more
// than 256 KiB of annotations, etcd requests over 1.5 MiB. When render
// shipped the node list verbatim, 9 such Nodes overflowed the annotation
// and 63 the etcd request. The annotation must also stay below a quarter
// of its limit, so that growth shows here long before a cluster refuses it.
func TestMachineConfigsApplyAtScale(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	const nodes = 2000
	dir := t.TempDir()
	nodesJSON, err := json.Marshal(corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: fixture.OpenShiftNodes(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	nodesFile, clusterFile, out := filepath.Join(dir, "nodes.json"), filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "out")
	if err := os.WriteFile(nodesFile, nodesJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clusterFile, []byte(fixture.OpenShiftCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := vipctl(t, "render", "-f", clusterFile, "--nodes", nodesFile, "--out-dir", out); code != 0 {
		t.Fatalf("vipctl render: exit %d\n%s%s", code, stdout, stderr)
	}

	srv := testapiserver.Start(t)
	srv.InstallCRDs(t, testapiserver.MachineConfigCRD(t))
	client, err := dynamic.NewForConfig(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range bundle.Roles {
		path := filepath.Join(out, "machineconfigs", bundle.MachineConfigName(role)+".yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		last, err := fixture.LastApplied(&obj)
		if err != nil {
			t.Fatal(err)
		}
		obj.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: last})
		if _, err := client.Resource(machineconfig.GVR).Create(context.Background(), &obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("oc apply of %s (%d KiB, for %d Nodes of %d KiB) refused: %v", path, len(data)/1024, nodes, len(nodesJSON)/1024, boundedError(err))
			continue
		}
		const quarter = 64 << 10
		if n := len(corev1.LastAppliedConfigAnnotation) + len(last); n > quarter {
			t.Errorf("%s: the annotation oc apply adds is %d KiB, above a quarter of the apiserver's 256 KiB limit", path, n/1024)
		}
	}
}

// boundedError cuts an apiserver error that quotes a whole object.
func boundedError(err error) string {
	const limit = 500
	if s := err.Error(); len(s) > limit {
		return s[:limit] + "…"
	}
	return err.Error()
}
