package configsource

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
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
