package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/statuswriter"
	"github.com/vipctl/vipctl/test/lab"
)

// TestAllocatorSkipsNodeAddresses: a Node whose own address lies in a
// pool (one that joined after `render --nodes` checked the pools, its
// address from DHCP, say) never has it given to a Service: the status
// says the pool holds a node's address, the next Service gets the
// address after it, and one that asks for it is refused naming the node.
func TestAllocatorSkipsNodeAddresses(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	e := startAllocEnv(t, statusYAML)
	admin := e.api.AdminConfig()
	lab.CreateClusterVIPs(t, admin, statusYAML)
	// 198.51.100.128 is pool web's first address (TestCRDStatusWriter's
	// first Service gets it).
	const nodeAddr = "198.51.100.128"
	addNode(t, e, "worker-7", nodeAddr)
	lab.StartAllocator(t, e.api, e.token, "a-0")
	waitStatus(t, admin, "Degraded "+statuswriter.ReasonInvalidSpec+" naming worker-7", func(s crd.ClusterVIPsStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, crd.ConditionDegraded)
		return c != nil && c.Reason == statuswriter.ReasonInvalidSpec && strings.Contains(c.Message, "worker-7")
	})

	e.service(t, "default", "web-1")
	first := e.waitIPs(t, "default", "web-1", 1)[0]
	if first == nodeAddr {
		t.Errorf("web-1 was given %s, worker-7's own address", nodeAddr)
	}
	e.service(t, "default", "asks", annotate(v1alpha1.AnnotationLoadBalancerIPs, nodeAddr))
	e.waitEvent(t, "default", "asks", "AllocationFailed", "node worker-7")

	// A node joins with the address web-1 holds: web-1 is given another.
	addNode(t, e, "worker-8", first)
	var now []string
	lab.WaitFor(t, 30*time.Second, "web-1 off "+first+", worker-8's own address", func() bool {
		now = e.waitIPs(t, "default", "web-1", 1)
		return now[0] != first && now[0] != nodeAddr
	})
	t.Logf("web-1 got %s, not worker-7's %s; moved to %s once worker-8 joined with it", first, nodeAddr, now[0])
}

// addNode creates a Node with one InternalIP, as a kubelet registers it.
func addNode(t *testing.T, e *allocEnv, name, addr string) {
	t.Helper()
	ctx := context.Background()
	n, err := e.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
	if _, err := e.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
