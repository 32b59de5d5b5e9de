package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/lab"
)

// TestSharedAddressWithTraffic: two Local Services with one selector
// share an address (vipctl.io/allow-shared-ip) and both answer on it from
// the client, through the one node that runs their endpoints; a Cluster
// Service asking for the same address with the same key is refused with
// an Event naming both policies and gets no address (real keepalived, the
// sidecars and the allocator against the real apiserver).
func TestSharedAddressWithTraffic(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", sidecarPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	ctx := context.Background()
	create := func(name string, port int32, policy corev1.ServiceExternalTrafficPolicy, annotations map[string]string) {
		t.Helper()
		annotations[v1alpha1.AnnotationAllowSharedIP] = "shop"
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy,
				Selector: map[string]string{"app": "shop"}, Ports: []corev1.ServicePort{{Port: port, Protocol: corev1.ProtocolTCP}}},
		}
		if _, err := kc.Admin.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	local := corev1.ServiceExternalTrafficPolicyLocal
	create("shop-http", 8080, local, map[string]string{})
	vip := waitServiceIPs(t, kc.Admin, "default", "shop-http", 1)[0]
	create("shop-admin", 8081, local, map[string]string{})
	if got := waitServiceIPs(t, kc.Admin, "default", "shop-admin", 1)[0]; got != vip {
		t.Fatalf("two Local Services with one selector and one sharing key: %s and %s, want one address", vip, got)
	}
	create("shop-metrics", 8082, corev1.ServiceExternalTrafficPolicyCluster, map[string]string{v1alpha1.AnnotationLoadBalancerIPs: vip})
	waitEvent(t, kc, "default", "shop-metrics", "AllocationFailed", "")
	evs, err := kc.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=shop-metrics,reason=AllocationFailed"})
	if err != nil || len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "externalTrafficPolicy Cluster") ||
		!strings.Contains(evs.Items[0].Message, `externalTrafficPolicy Local with selector "app=shop"`) {
		t.Errorf("the refusal's Event does not name both policies: %v (err %v)", evs, err)
	}
	if got := serviceIPs(t, kc, "shop-metrics"); len(got) != 0 {
		t.Errorf("the Cluster Service asking for %s got %v, want nothing", vip, got)
	}

	// Both Local Services' endpoints run on worker-1 only.
	for _, s := range []string{"shop-http", "shop-admin"} {
		setEndpoints(t, kc.Admin, s, map[string]bool{"worker-1": true, "worker-0": false})
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
		kc.ByName[w].StartEcho(t, "0.0.0.0:8081")
	}
	if h := kc.WaitHolder(vip, 30*time.Second, func(h string) bool { return h == "worker-1" }); h != "worker-1" {
		t.Fatalf("%s held by %s, want worker-1, where both Services' endpoints run", vip, h)
	}
	for _, port := range []int{8080, 8081} {
		p := kc.Poll(fmt.Sprintf("http://%s:%d/", vip, port), 20*time.Millisecond)
		lab.WaitFor(t, 30*time.Second, fmt.Sprintf("%s:%d answers from the client", vip, port), func() bool { ok, _ := p.Counts(); return ok > 5 })
		p.WantNoFailures(t, fmt.Sprintf("%s:%d, shared by two Local Services", vip, port))
	}
	if h := kc.Holders(vip); len(h) != 1 || h[0] != "worker-1" {
		t.Errorf("%s held by %v, want worker-1 alone", vip, h)
	}
}
