package testapiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// MachineConfigCRD is the path of the MachineConfig CRD shipped in the
// openshift/api module, found through the module cache.
func MachineConfigCRD(t testing.TB) string {
	t.Helper()
	dir, err := moduleDir("github.com/openshift/api")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "machineconfiguration", "v1", "zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigs.crd.yaml")
}

// InstallCRDs creates the CRDs in the given files and waits until each is
// established, so the test can use the new resource at once.
func (s *Server) InstallCRDs(t testing.TB, paths ...string) {
	t.Helper()
	client, err := dynamic.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if _, err := client.Resource(crdGVR).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CRD from %s: %v", p, err)
		}
		name := obj.GetName()
		err = WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			got, err := client.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, fmt.Errorf("CRD %s not established yet", name)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
