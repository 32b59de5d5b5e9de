package update

import (
	"context"
	"io"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
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

// After a CRD change the object's write is tried again while the
// apiserver still refuses the new schema's fields as unknown (it serves
// a changed CRD a moment after the update returns); without a CRD
// change, or for another refusal, the first error is the answer.
func TestWriteObjectWaitsForANewSchema(t *testing.T) {
	for _, tc := range []struct {
		name      string
		newSchema bool
		refusal   string
		wantTries int
		wantErr   bool
	}{
		{"new schema, unknown field", true, `strict decoding error: unknown field "spec.monitoring.labels"`, 3, false},
		{"no new schema", false, `strict decoding error: unknown field "spec.monitoring.labels"`, 1, true},
		{"new schema, another refusal", true, "spec.vrrp: Invalid value", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]any{"vipctl.io/config-source": "true"}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{crd.Resource: "ClusterVIPsList"})
			if _, err := dyn.Resource(crd.Resource).Create(context.Background(), clusterVIPs(1, "1", ann), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tries := 0
			dyn.PrependReactor("update", "clustervips", func(a k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries < 3 {
					return true, nil, apierrors.NewBadRequest(tc.refusal)
				}
				return true, a.(k8stesting.UpdateAction).GetObject(), nil
			})
			desired, err := v1alpha1.Parse([]byte("apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\nmetadata: {name: lab}\nspec:\n  baseDomain: example.test\n  machineNetworks: [198.51.100.0/24]\n  api: {vips: [198.51.100.5]}\n"))
			if err != nil {
				t.Fatal(err)
			}
			p := &Plan{Desired: desired, Object: clusterVIPs(1, "1", ann)}
			err = Cluster{Dynamic: dyn}.writeObjectUnder(context.Background(), p, tc.newSchema, io.Discard)
			if tries != tc.wantTries || tc.wantErr != (err != nil) {
				t.Errorf("%d writes, err %v; want %d writes, error %t", tries, err, tc.wantTries, tc.wantErr)
			}
		})
	}
}

// A ClusterVIPs create answered "the server could not find the requested
// resource" (an apiserver that does not serve the CRD yet) is tried
// again until one serves it; another refusal is the answer at once.
func TestCreateServedWaitsForTheResource(t *testing.T) {
	notServed := apierrors.NewNotFound(schema.GroupResource{}, "")
	for _, tc := range []struct {
		name      string
		errs      []error
		wantTries int
		wantErr   bool
	}{
		{"served on the third try", []error{notServed, notServed, nil}, 3, false},
		{"refused otherwise", []error{apierrors.NewBadRequest("spec.vrrp: Invalid value")}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := createServed(context.Background(), func() error {
				tries++
				return tc.errs[min(tries, len(tc.errs))-1]
			})
			if tries != tc.wantTries || tc.wantErr != (err != nil) {
				t.Errorf("%d tries, err %v; want %d tries, error %t", tries, err, tc.wantTries, tc.wantErr)
			}
		})
	}
}
