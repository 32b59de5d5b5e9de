package cluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func annotatedNode(name, iface string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{InterfaceAnnotation: iface}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}},
	}
}

// TestInterfaceAnnotationValidated: the annotation lands in keepalived.conf,
// so one that would inject config (a newline and a brace) or is no
// interface name leaves its node out, with a bounded message; every other
// node still renders.
func TestInterfaceAnnotationValidated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 100000)
	nodes, errs := Nodes([]*corev1.Node{
		annotatedNode("good", "bond0.100"),
		annotatedNode("inject", "eth0\n}\nvrrp_script evil {\n script \"/bin/sh\"\n"),
		annotatedNode("huge", long),
	}, "br-ex")
	if len(nodes) != 1 || nodes[0].Name != "good" || nodes[0].Interface != "bond0.100" {
		t.Fatalf("nodes = %+v, want only good on bond0.100", nodes)
	}
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want one per bad node", errs)
	}
	want := `node inject: annotation vipctl.io/interface "eth0\n}\nvrrp_script evil {\n script \"/bin/sh\"\n": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`
	if errs[0].Error() != want {
		t.Errorf("got  %s\nwant %s", errs[0], want)
	}
	if n := len(errs[1].Error()); n > 300 {
		t.Errorf("message about a 100 kB annotation is %d bytes; want it bounded", n)
	}
}
