package update

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vipctl/vipctl/pkg/cluster"
)

// SetDrain asks a node's sidecar to drain it (or to end that drain) by
// setting (removing) cluster.DrainAnnotation on its Node: the sidecar then
// gives every VIP away make-before-break, as keepalived's preStop does,
// and keeps it that way across its own restarts until the undrain.
func (c Cluster) SetDrain(ctx context.Context, node string, drain bool) error {
	var value any // JSON null removes the annotation in a merge patch
	if drain {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{cluster.DrainAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: no such Node", node)
	}
	return err
}
