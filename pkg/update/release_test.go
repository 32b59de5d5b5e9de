package update

import (
	"context"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/machineconfig"
)

// clusterVersion is the ClusterVersion "version" with status.history as
// given, newest first: pairs of version and state.
func clusterVersion(desired string, history ...string) *unstructured.Unstructured {
	var h []any
	for i := 0; i+1 < len(history); i += 2 {
		h = append(h, map[string]any{"version": history[i], "state": history[i+1]})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1",
		"kind":       "ClusterVersion",
		"metadata":   map[string]any{"name": "version"},
		"status": map[string]any{
			"desired": map[string]any{"version": desired},
			"history": h,
		},
	}}
}

// targeting is an example config whose target is release. It loads the
// file itself so that this file depends on no other test file here.
func targeting(t *testing.T, release string) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Load("../../examples/pools-node-groups.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.OpenShiftRelease = release
	return c
}

func TestReleaseWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		target string
		cv     *unstructured.Unstructured // nil: no ClusterVersion (plain Kubernetes)
		want   string                     // empty: no warning
		// degrades: MachineConfigs for the target would degrade the
		// cluster's pools, so update refuses to write them.
		degrades bool
	}{
		{
			name:     "older release, older spec",
			target:   "4.19",
			cv:       clusterVersion("4.16.12", "4.16.12", "Completed"),
			want:     "the cluster runs OpenShift 4.16.12, older than spec.openshiftRelease 4.19: its Machine Config Operator parses Ignition 3.4.0 at most and would refuse MachineConfigs written for 4.19 (Ignition 3.5.0); set spec.openshiftRelease to 4.16",
			degrades: true,
		},
		{
			name:   "older release, same spec",
			target: "4.18",
			cv:     clusterVersion("4.16.12", "4.16.12", "Completed"),
			want:   "the cluster runs OpenShift 4.16.12, older than spec.openshiftRelease 4.18; set spec.openshiftRelease to 4.16",
		},
		{
			name:     "upgrading: the release it comes from counts",
			target:   "4.19",
			cv:       clusterVersion("4.19.2", "4.19.2", "Partial", "4.18.7", "Completed"),
			want:     "the cluster runs OpenShift 4.18.7, older than spec.openshiftRelease 4.19: its Machine Config Operator parses Ignition 3.4.0",
			degrades: true,
		},
		{
			name:     "older than any supported",
			target:   "4.14",
			cv:       clusterVersion("4.12.40", "4.12.40", "Completed"),
			want:     "the cluster runs OpenShift 4.12.40, older than spec.openshiftRelease 4.14, and vipctl supports no release older than 4.14",
			degrades: true,
		},
		{
			name:   "installing",
			target: "4.20",
			cv:     clusterVersion("4.19.0-rc.2"),
			want:   "the cluster runs OpenShift 4.19.0-rc.2, older than spec.openshiftRelease 4.20",
		},
		{name: "same release", target: "4.18", cv: clusterVersion("4.18.1", "4.18.1", "Completed")},
		{name: "newer release", target: "4.14", cv: clusterVersion("4.20.3", "4.20.3", "Completed", "4.19.9", "Completed")},
		{name: "a release vipctl does not know yet", target: "4.22", cv: clusterVersion("5.0.1", "5.0.1", "Completed")},
		{name: "no ClusterVersion", target: "4.19"},
		{name: "unreadable version", target: "4.19", cv: clusterVersion("", "nightly", "Completed")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var objs []runtime.Object
			if tc.cv != nil {
				objs = append(objs, tc.cv)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{clusterVersionGVR: "ClusterVersionList"}, objs...)
			finding := Cluster{Dynamic: dyn}.CheckRelease(context.Background(), targeting(t, tc.target))
			got := finding.Warning()
			if finding.Degrades != tc.degrades {
				t.Errorf("degrades %v, want %v", finding.Degrades, tc.degrades)
			}
			switch {
			case tc.want == "" && got != "":
				t.Errorf("warning %q, want none", got)
			case !strings.HasPrefix(got, tc.want):
				t.Errorf("warning %q\nwant     %q", got, tc.want)
			}
		})
	}
}

// TestApplyWritesForTheTarget: the MachineConfigs vipctl update writes
// carry the spec of the config's own target, as vipctl render's do.
func TestApplyWritesForTheTarget(t *testing.T) {
	t.Parallel()
	p, err := Compute(targeting(t, "4.14"), targeting(t, "4.19"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Static, ",") != "spec.openshiftRelease" {
		t.Fatalf("static changes %v, want spec.openshiftRelease: a new target means new MachineConfigs", p.Static)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{machineconfig.GVR: "MachineConfigList"})
	cl := Cluster{Kube: kubefake.NewClientset(), Dynamic: dyn, Namespace: "vipctl-system"}
	ctx := context.Background()
	if err := cl.Apply(ctx, p, nil, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"50-vipctl-master", "50-vipctl-worker"} {
		mc, err := dyn.Resource(machineconfig.GVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(mc.Object, "spec", "config", "ignition", "version"); v != "3.5.0" {
			t.Errorf("%s: Ignition %q, want 3.5.0 for 4.19", name, v)
		}
	}
}
