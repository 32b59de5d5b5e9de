package sidecar

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// changedByCopy is what changed must answer: whether what strip keeps of
// the old object, given the new resourceVersion, differs from what it
// keeps of the new one.
func changedByCopy(t *testing.T, old, obj runtime.Object) bool {
	t.Helper()
	a, err := strip(old.DeepCopyObject())
	if err != nil {
		t.Fatal(err)
	}
	b, err := strip(obj.DeepCopyObject())
	if err != nil {
		t.Fatal(err)
	}
	a.(metav1.Object).SetResourceVersion(b.(metav1.Object).GetResourceVersion())
	// Kept for the healing, and no change (watch.go).
	for _, o := range []any{a, b} {
		if n, ok := o.(*corev1.Node); ok {
			delete(n.Annotations, v1alpha1.AnnotationNodeWire)
			if len(n.Annotations) == 0 {
				n.Annotations = nil
			}
		}
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// TestWireAnnotationKeptNoChange: a Node's wire findings stay in the
// informer's copy (the holder reads them) and a new one renders nothing.
func TestWireAnnotationKeptNoChange(t *testing.T) {
	t.Parallel()
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1", ResourceVersion: "1"}}
	obj := old.DeepCopy()
	obj.ResourceVersion = "2"
	obj.Annotations = map[string]string{v1alpha1.AnnotationNodeWire: `[{"address":"198.51.100.5","answers":0,"at":"2026-11-30T10:00:00Z"}]`}
	if changed(old, obj) {
		t.Error("a new wire finding on a Node counts as a change: every node would render again")
	}
	kept, err := strip(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := kept.(*corev1.Node).Annotations[v1alpha1.AnnotationNodeWire]; got != obj.Annotations[v1alpha1.AnnotationNodeWire] {
		t.Errorf("strip kept the wire annotation as %q", got)
	}
}

// TestChangedComparesWhatStripKeeps: changed compares the kinds strip
// narrows field by field, by hand; a kept field it skipped would let a
// change that renders pass for a heartbeat, and a dropped one it read
// would render for nothing. Every field of each watched kind, down to
// the leaves, set in turn to a random value must give the answer of a
// deep equality of the stripped objects, for full objects (as tests pass
// them) and stripped ones (as the informers do); a new resourceVersion
// alone is no change.
func TestChangedComparesWhatStripKeeps(t *testing.T) {
	t.Parallel()
	f := randfill.NewWithSeed(1).NilChance(0.2).NumElements(1, 2).MaxDepth(8)
	for _, kind := range []runtime.Object{&corev1.Node{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Pod{}, &corev1.ConfigMap{}} {
		name := reflect.TypeOf(kind).Elem().Name()
		kept := 0
		for trial := range 4 {
			old := kind.DeepCopyObject()
			f.Fill(old)
			old.(metav1.Object).SetResourceVersion("1")
			next := func() runtime.Object {
				obj := old.DeepCopyObject()
				obj.(metav1.Object).SetResourceVersion("2")
				return obj
			}
			if obj := next(); changed(old, obj) {
				t.Errorf("%s #%d: a new resourceVersion alone counts as a change", name, trial)
			}
			for i := 0; ; i++ {
				obj := next()
				path, ok := fillLeaf(f, reflect.ValueOf(obj).Elem(), name, i)
				if !ok {
					break
				}
				obj.(metav1.Object).SetResourceVersion("2")
				want := changedByCopy(t, old, obj)
				if want {
					kept++
				}
				if got := changed(old, obj); got != want {
					t.Errorf("%s #%d: %s set to a random value: changed %v, a deep equality of the stripped objects says %v", name, trial, path, got, want)
				}
				a, _ := strip(old.DeepCopyObject())
				b, _ := strip(obj)
				if got := changed(a, b); got != want {
					t.Errorf("%s #%d: %s set to a random value, both stripped: changed %v, a deep equality says %v", name, trial, path, got, want)
				}
			}
		}
		if kept == 0 {
			t.Errorf("%s: no random field made a difference: the test proves nothing", name)
		}
	}
}

// fillLeaf fills the n-th leaf of v (walking structs, pointers and the
// first element of slices, in field order; pointers, slices and maps are
// leaves too) with a random value, and names it; false when v has fewer
// leaves.
func fillLeaf(f *randfill.Filler, v reflect.Value, path string, n int) (string, bool) {
	seen := 0
	var found string
	var walk func(v reflect.Value, path string) bool
	walk = func(v reflect.Value, path string) bool {
		if seen == n {
			f.Fill(v.Addr().Interface())
			found = path
			return true
		}
		seen++
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[metav1.Time]() {
				return false
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() && walk(v.Field(i), path+"."+v.Type().Field(i).Name) {
					return true
				}
			}
		case reflect.Pointer:
			if !v.IsNil() {
				return walk(v.Elem(), path)
			}
		case reflect.Slice:
			if v.Len() > 0 {
				return walk(v.Index(0), path+"[0]")
			}
		}
		return false
	}
	return found, walk(v, path)
}

// BenchmarkChangedHeartbeat: a Node status post as the watch delivers it
// after strip, which changed must find unchanged.
func BenchmarkChangedHeartbeat(b *testing.B) {
	node := func(rv int) any {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-0001", UID: "6a1c2f5e-0d4b-4e53-9a57-0c1e2b3d4f50", ResourceVersion: fmt.Sprint(rv),
				CreationTimestamp: metav1.NewTime(time.Unix(1_790_000_000, 0)),
				Labels: map[string]string{"kubernetes.io/hostname": "node-0001", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": "rack-1"},
				Annotations: map[string]string{"vipctl.io/vips": `[]`, "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
			Status: corev1.NodeStatus{Phase: corev1.NodeRunning, Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "2001:db8:1::1001"}, {Type: corev1.NodeHostName, Address: "node-0001"}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(int64(1_790_000_000+rv), 0))}}},
		}
		obj, _ := strip(n)
		return obj
	}
	old, obj := node(1), node(2)
	b.ReportAllocs()
	for b.Loop() {
		if changed(old, obj) {
			b.Fatal("a heartbeat counted as a change")
		}
	}
}
