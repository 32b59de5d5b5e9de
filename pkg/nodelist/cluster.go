package nodelist

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// FromCluster is the node list of a running cluster: every Node with only
// what rendering reads (cluster.SlimNodes), under the names the Nodes
// really have. skipped names each Node rendering would refuse (no address
// yet). A list `render --nodes` would refuse (no Node left, two Nodes with
// one address) is refused here already, with the same checks, its items
// as the list would hold them.
func FromCluster(ctx context.Context, kube kubernetes.Interface) (nodes []corev1.Node, skipped []error, err error) {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	nodes, skipped = cluster.SlimNodes(list.Items)
	if errs := (Input{}).Validate(nodes); len(errs) > 0 {
		return nil, skipped, fmt.Errorf("the cluster's Nodes, as the list would hold them: %w", &v1alpha1.ValidationError{Errors: errs})
	}
	return nodes, skipped, nil
}
