package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestMachineConfigsAcceptedByAPIServer renders every example and hands
// each MachineConfig to a real kube-apiserver that has the MachineConfig
// CRD from the openshift/api module: first a server-side dry run, then a
// real create whose stored object must read back unchanged.
func TestMachineConfigsAcceptedByAPIServer(t *testing.T) {
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
	nodes, err := cluster.LoadNodeList("../../examples/nodes/compact.yaml", "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		c, err := v1alpha1.Load(ex)
		if err != nil {
			t.Fatal(err)
		}
		opts := bundle.Options{}
		if !strings.Contains(ex, "node-groups") {
			opts.Nodes = nodes
			opts.NodesYAML = []byte("kind: List\n")
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
