package testapiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestHarness proves the harness gives what tests rely on: an admin, a node
// identity the Node authorizer restricts, and a restart that keeps data.
func TestHarness(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(s.AdminConfig())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	asNode := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "worker-0"))
	if _, err := asNode.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{}); err != nil {
		t.Errorf("node cannot read itself: %v", err)
	}
	if _, err := asNode.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("node cannot list services: %v", err)
	}
	got, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.130"}}
	if _, err := asNode.CoreV1().Services("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node wrote Service status: err = %v, want Forbidden", err)
	}

	s.RestartAPIServer(t, nil)
	if _, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("after restart: %v", err)
	}
}
