package testapiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/test/fixture"
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

// ClusterVersionCRD is the path of OpenShift's ClusterVersion CRD (the
// default feature set) shipped in the openshift/api module, where `vipctl
// update` and `status` read the release a cluster runs.
func ClusterVersionCRD(t testing.TB) string {
	t.Helper()
	dir, err := moduleDir("github.com/openshift/api")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests", "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml")
}

// PrometheusOperatorCRDs are the paths of the CRDs of the given resources
// (servicemonitors, prometheusrules, ...) as prometheus-operator ships
// them in its Go module, at the release of the API types vipctl builds
// its objects with.
func PrometheusOperatorCRDs(t testing.TB, resources ...string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var apis struct{ Version string }
	if err := json.Unmarshal(out, &apis); err != nil {
		t.Fatal(err)
	}
	// Not a dependency (its own dependencies are the whole operator):
	// downloaded by itself, outside vipctl's module, into the module cache.
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator@"+apis.Version)
	cmd.Dir = t.TempDir()
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go mod download prometheus-operator %s: %v", apis.Version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download prometheus-operator %s: %v %s", apis.Version, err, out)
	}
	var paths []string
	for _, r := range resources {
		paths = append(paths, filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+r+".yaml"))
	}
	return paths
}

// SetClusterVersion creates the ClusterVersion "version" (its CRD must be
// installed) as the cluster-version operator reports a cluster that
// finished installing version: one Completed entry in status.history.
func (s *Server) SetClusterVersion(t testing.TB, version string) {
	t.Helper()
	SetClusterVersionAt(t, s.AdminConfig(), version)
}

// SetClusterVersionAt is SetClusterVersion on the apiserver cfg reaches
// (one this package did not start: the cluster lab's on-node ones).
func SetClusterVersionAt(t testing.TB, cfg *rest.Config, version string) {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	cv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
		"metadata": map[string]any{"name": "version"},
		"spec":     map[string]any{"clusterID": "00000000-0000-4000-8000-000000000000"},
	}}
	// Behind a VIP of several apiservers (the cluster lab), the one that
	// answers may not serve the new CRD yet although another reported it
	// established: it says NotFound until its own informer has it.
	var created *unstructured.Unstructured
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		created, err = client.Resource(gvr).Create(ctx, cv, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("creating ClusterVersion: %v", err)
	}
	image := "quay.io/openshift-release-dev/ocp-release:" + version + "-x86_64"
	now := time.Now().UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]any{
		"desired":            map[string]any{"version": version, "image": image},
		"history":            []any{map[string]any{"state": "Completed", "version": version, "image": image, "startedTime": now, "completionTime": now, "verified": false}},
		"observedGeneration": created.GetGeneration(),
		"versionHash":        "test",
		"availableUpdates":   nil,
	}
	if _, err := client.Resource(gvr).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("ClusterVersion status: %v", err)
	}
}

// InstallCRDs creates the CRDs in the given files and waits until each is
// established, so the test can use the new resource at once.
func (s *Server) InstallCRDs(t testing.TB, paths ...string) {
	t.Helper()
	InstallCRDsAt(t, s.AdminConfig(), paths...)
}

// InstallCRDsAt is InstallCRDs on the apiserver cfg reaches.
func InstallCRDsAt(t testing.TB, cfg *rest.Config, paths ...string) {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range paths {
		obj := fixture.ReadObject(t, p)
		if _, err := client.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
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
