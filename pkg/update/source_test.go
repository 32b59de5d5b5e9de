package update

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
)

func clusterVIPs(gen int64, rv string, ann map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vipctl.io/v1alpha1", "kind": "ClusterVIPs",
		"metadata": map[string]any{"name": "lab", "generation": gen, "resourceVersion": rv, "annotations": ann}, "spec": map[string]any{}}}
}

// A conflict from a status write alone (the spec's generation and the
// annotations as read) is retried on the newer object; one from an edit
// of the spec is the conflict it is.
func TestUpdateObjectRetriesStatusConflictsOnly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		latestGen int64
		wantErr   bool
	}{
		{"status written meanwhile", 1, false},
		{"spec edited meanwhile", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]any{"vipctl.io/config-source": "true"}
			latest := clusterVIPs(tc.latestGen, "2", ann)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{crd.Resource: "ClusterVIPsList"})
			// Created through the resource: the fake would guess
			// "clustervipses" from the kind.
			if _, err := dyn.Resource(crd.Resource).Create(context.Background(), latest, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var updates []string
			dyn.PrependReactor("update", "clustervips", func(a k8stesting.Action) (bool, runtime.Object, error) {
				obj := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
				updates = append(updates, obj.GetResourceVersion())
				if obj.GetResourceVersion() != "2" {
					return true, nil, apierrors.NewConflict(crd.Resource.GroupResource(), "lab", nil)
				}
				return true, obj, nil
			})
			c := Cluster{Dynamic: dyn}
			read := clusterVIPs(1, "1", ann)
			err := c.updateObject(context.Background(), read, func(u *unstructured.Unstructured) { u.Object["spec"] = map[string]any{"baseDomain": "x"} })
			if tc.wantErr != (err != nil) || (!tc.wantErr && len(updates) != 2) {
				t.Errorf("err %v after updates at resourceVersions %v; want error %t", err, updates, tc.wantErr)
			}
			if tc.wantErr && !apierrors.IsConflict(err) {
				t.Errorf("err %v, want the conflict", err)
			}
		})
	}
}
