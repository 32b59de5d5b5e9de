package update

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/version"
)

// TestRunRefusesNewerFields: a ConfigMap a newer vipctl wrote (a field
// this one does not know) is read, the field named, and not written
// over: update would drop the field. Nothing is shown or written.
func TestRunRefusesNewerFields(t *testing.T) {
	c, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.ShippedYAML()
	if err != nil {
		t.Fatal(err)
	}
	newer := strings.Replace(string(data), "  servicePools:\n  - ", "  servicePools:\n  - futureKnob: 1\n    ", 1)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: "vipctl-system"},
		Data: map[string]string{v1alpha1.ConfigMapKey: newer}}
	cl := Cluster{Kube: fake.NewClientset(cm), Namespace: "vipctl-system"}

	live, unknown, _, err := cl.LiveStored(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (v1alpha1.UnknownFields{"spec.servicePools[0].futureKnob"}); !slices.Equal(unknown, want) || live.Spec.ServicePools[0].Name != "general" {
		t.Errorf("LiveStored: unknown %q, pools %+v; want %q and the pool read", unknown, live.Spec.ServicePools, want)
	}

	shown := false
	err = cl.Run(context.Background(), &Request{File: "cluster.yaml", Config: c}, RunOptions{Show: func(*Plan) error { shown = true; return nil }})
	want := "configmap vipctl-system/vipctl-config was written by a newer vipctl than this one (" + version.Get() + "): it holds fields this one does not know and would drop: spec.servicePools[0].futureKnob; " +
		"edit it with the vipctl that wrote it, or remove those fields with it first"
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v\nwant: %s", err, want)
	}
	if shown {
		t.Error("a plan was shown")
	}
	after, _ := cl.Kube.CoreV1().ConfigMaps("vipctl-system").Get(context.Background(), v1alpha1.ConfigMapName, metav1.GetOptions{})
	if after.Data[v1alpha1.ConfigMapKey] != newer {
		t.Error("the ConfigMap was written")
	}
}
