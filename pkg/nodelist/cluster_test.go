package nodelist

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestFromClusterRefuses: vipctl nodes --from-cluster writes no list that
// render --nodes would refuse: a cluster whose Nodes share an address, or
// with no Node to list, is named as such.
func TestFromClusterRefuses(t *testing.T) {
	t.Parallel()
	kubeNode := func(name string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		return n
	}
	cases := []struct {
		name  string
		nodes []*corev1.Node
		want  string
	}{
		{"three nodes", []*corev1.Node{kubeNode("master-0", "198.51.100.11"), kubeNode("master-1", "198.51.100.12"), kubeNode("worker-0", "198.51.100.21")}, ""},
		{"no Node", nil, "the cluster's Nodes, as the list would hold them: 1 invalid field(s):\n  items: Required value: no node: a node list names the nodes to render for; without --nodes no node's files are written"},
		{"only a Node without an address yet", []*corev1.Node{kubeNode("worker-9")},
			"the cluster's Nodes, as the list would hold them: 1 invalid field(s):\n  items: Required value: no node: a node list names the nodes to render for; without --nodes no node's files are written"},
		{"two Nodes with one address", []*corev1.Node{kubeNode("master-0", "198.51.100.11"), kubeNode("worker-0", "198.51.100.21"), kubeNode("worker-1", "198.51.100.21")},
			"the cluster's Nodes, as the list would hold them: 1 invalid field(s):\n  items[2].status.addresses[0].address: Invalid value: \"198.51.100.21\": also the address of node worker-0 (items[1].status.addresses[0].address): the node would be its own VRRP peer and haproxy would list one host twice"},
	}
	for _, tc := range cases {
		kube := fake.NewClientset()
		for _, n := range tc.nodes {
			if _, err := kube.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := FromCluster(t.Context(), kube)
		if got := fixture.ErrText(err); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
