package status

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
)

// ObjectVerdict is what the ClusterVIPs object's status says of the
// cluster (written by the allocator's leader, pkg/statuswriter).
type ObjectVerdict struct {
	Name string `json:"name"`
	// Generation is the object's; ObservedGeneration the one its status
	// was computed from.
	Generation         int64              `json:"generation"`
	ObservedGeneration int64              `json:"observedGeneration"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// ReadObject reads the ClusterVIPs object name's verdict. A cluster
// without the CRD or the object (not migrated, nothing to say) gives
// nil and no error.
func ReadObject(ctx context.Context, dyn dynamic.Interface, name string) (*ObjectVerdict, error) {
	u, err := dyn.Resource(crd.Resource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ClusterVIPs %s: %w", name, err)
	}
	return verdictOf(u)
}

// verdictOf is the verdict of the object u.
func verdictOf(u *unstructured.Unstructured) (*ObjectVerdict, error) {
	obj, err := crd.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	return &ObjectVerdict{Name: obj.Name, Generation: obj.Generation, ObservedGeneration: obj.Status.ObservedGeneration, Conditions: obj.Status.Conditions}, nil
}

// Text is the verdict in a line per condition.
func (o *ObjectVerdict) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ClusterVIPs %s, generation %d", o.Name, o.Generation)
	switch {
	case o.ObservedGeneration == 0:
		b.WriteString(": no status written yet (the allocator writes it)\n")
		return b.String()
	case o.ObservedGeneration != o.Generation:
		fmt.Fprintf(&b, " (status of generation %d)", o.ObservedGeneration)
	}
	b.WriteString(":\n")
	for _, c := range o.Conditions {
		fmt.Fprintf(&b, "  %s=%s  %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
