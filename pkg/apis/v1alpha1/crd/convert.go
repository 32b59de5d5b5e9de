package crd

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured is the typed ClusterVIPs of an object the dynamic
// client read. Fields this vipctl does not know (a newer CRD's) are
// ignored.
func FromUnstructured(u *unstructured.Unstructured) (*ClusterVIPs, error) {
	var obj ClusterVIPs
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return nil, fmt.Errorf("clustervips %s: %w", u.GetName(), err)
	}
	return &obj, nil
}
