package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/lab"
)

// TestAllocatorSharingFollowsTrafficPolicy: against the real apiserver,
// Services share an address only when they are reached through the same
// nodes (allocator.BackendKey): all externalTrafficPolicy Cluster, or all
// Local with one selector. A share an older vipctl recorded in the
// Services' status against that rule is kept and warned about, never
// taken away.
func TestAllocatorSharingFollowsTrafficPolicy(t *testing.T) {
	e := startAllocEnv(t, clusterYAML("fast", "unicast", allocPools))
	ctx := context.Background()
	shared := func(port int32, local bool, selector map[string]string) svcOpt {
		return func(s *corev1.Service) {
			s.Annotations[v1alpha1.AnnotationAllowSharedIP] = "k"
			s.Annotations[v1alpha1.AnnotationPool] = "web"
			s.Spec.Ports = []corev1.ServicePort{{Port: port}}
			s.Spec.Selector = selector
			if local {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}
		}
	}
	// As an older vipctl left it: a Cluster and a Local Service on one
	// address, in their status, before this allocator starts.
	const legacy = "198.51.100.140"
	for _, s := range []*corev1.Service{
		e.service(t, "default", "legacy-web", shared(80, false, map[string]string{"app": "web"})),
		e.service(t, "default", "legacy-db", shared(5432, true, map[string]string{"app": "db"})),
	} {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: legacy}}
		if _, err := e.admin.CoreV1().Services(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // creation times a second apart: legacy-web is the older
	}
	lab.StartAllocator(t, e.api, e.token, "a-0")

	e.service(t, "default", "local-a", shared(80, true, map[string]string{"app": "a"}))
	a := e.waitIPs(t, "default", "local-a", 1)
	e.service(t, "default", "local-a-too", shared(443, true, map[string]string{"app": "a"}))
	if got := e.waitIPs(t, "default", "local-a-too", 1); got[0] != a[0] {
		t.Errorf("two Local Services with one selector: %v and %v, want one address", a, got)
	}
	e.service(t, "default", "cluster-b", shared(8080, false, map[string]string{"app": "a"}))
	if got := e.waitIPs(t, "default", "cluster-b", 1); got[0] == a[0] {
		t.Errorf("a Cluster Service got the address of two Local ones: %v", got)
	}
	e.service(t, "default", "local-c", shared(9090, true, map[string]string{"app": "c"}))
	if got := e.waitIPs(t, "default", "local-c", 1); got[0] == a[0] {
		t.Errorf("a Local Service with another selector got the address %v", got)
	}
	e.service(t, "default", "local-c-asks", shared(9091, true, map[string]string{"app": "c"}), annotate(v1alpha1.AnnotationLoadBalancerIPs, a[0]))
	e.waitEvent(t, "default", "local-c-asks", "AllocationFailed", `is externalTrafficPolicy Local with selector "app=c" and it is externalTrafficPolicy Local with selector "app=a"`)

	for _, name := range []string{"legacy-web", "legacy-db"} {
		if got := e.waitIPs(t, "default", name, 1); got[0] != legacy {
			t.Errorf("%s: %v, want to keep %s", name, got, legacy)
		}
	}
	e.waitEvent(t, "default", "legacy-db", allocator.EventSharingIncompatible, legacy+" is shared with default/legacy-web")
	e.waitEvent(t, "default", "legacy-web", allocator.EventSharingIncompatible, legacy+" is shared with default/legacy-db")
}
