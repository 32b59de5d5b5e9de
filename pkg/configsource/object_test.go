package configsource

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
)

func object(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": "lab"}, "spec": spec}}
}

// Read defaults and validates the object as ParseStored does the
// ConfigMap's copy: the same defaults, the same field paths.
func TestReadDefaultsAndValidates(t *testing.T) {
	spec := map[string]any{"baseDomain": "example.com", "machineNetworks": []any{"198.51.100.0/24"},
		"api": map[string]any{"vips": []any{"198.51.100.5"}}}
	c, err := Read(object(spec))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Name != "lab" || c.Spec.API.Port == 0 || c.Spec.VRRP.Profile == "" {
		t.Errorf("not defaulted: name %q, api port %d, profile %q", c.Metadata.Name, c.Spec.API.Port, c.Spec.VRRP.Profile)
	}
	spec["api"] = map[string]any{"vips": []any{"203.0.113.5"}}
	if _, err := Read(object(spec)); err == nil || !strings.Contains(err.Error(), "spec.api.vips") {
		t.Errorf("a VIP outside the machine networks: %v, want an error at spec.api.vips", err)
	}
}

// WaitServed looks again within a second after an error that is neither
// the resource's absence nor a refusal (here the apiserver's 503, as
// while etcd elects a leader), not after the probe interval (an hour
// here: the test's deadline would end first), and after the probe
// interval when the resource is not installed.
func TestWaitServedRetriesTransientErrorsSoon(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		served  bool
		lookups int
	}{
		{"unavailable", apierrors.NewServiceUnavailable("etcdserver: leader changed"), true, 2},
		{"timeout", apierrors.NewTimeoutError("request did not complete within 34s", 1), true, 2},
		{"not installed", apierrors.NewNotFound(schema.GroupResource{Group: crd.Resource.Group, Resource: crd.Resource.Resource}, ""), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{crd.Resource: "ClusterVIPsList"})
			lookups := 0
			dyn.PrependReactor("list", crd.Resource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				lookups++
				if lookups == 1 {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := WaitServed(ctx, dyn, "", time.Hour, nil, slog.New(slog.DiscardHandler), "testing")
			if served := err == nil; served != tc.served || lookups != tc.lookups {
				t.Errorf("after %v: served %v after %d lookups (%v); want served %v after %d", tc.err, served, lookups, err, tc.served, tc.lookups)
			}
		})
	}
}
