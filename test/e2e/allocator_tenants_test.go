package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/lab"
)

// TestAllocatorTenants: against the real apiserver, with the allocator's
// own permissions, a Service in another namespace cannot join an address
// by reusing its allow-shared-ip key, and a namespace stops at the pool's
// maxPerNamespace while another namespace still gets addresses. A real
// Prometheus with the rendered alerts scrapes the allocator: the refusal
// fires VipctlNamespaceAtCap, a pool given out whole fires
// VipctlPoolExhausted, and each resolves once the Service is gone.
func TestAllocatorTenants(t *testing.T) {
	cfgYAML := clusterYAML("fast", "unicast", `  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      maxPerNamespace: 2
    - name: tiny
      addresses: [198.51.100.200-198.51.100.203] # two for Services, two anchors
      autoAssign: false
`)
	e := startAllocEnv(t, cfgYAML)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := e.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alloc := lab.StartAllocator(t, e.api, e.token, "a-0")
	cfg, err := v1alpha1.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	w := watchAlerts(t, cfg, scrapeTarget{job: manifests.AllocatorMetricsName, reg: alloc.Registry})
	w.expect("no Service yet")
	share := func(port int32) svcOpt {
		return func(s *corev1.Service) {
			s.Annotations[v1alpha1.AnnotationAllowSharedIP] = "k"
			s.Spec.Ports = []corev1.ServicePort{{Port: port}}
		}
	}
	e.service(t, "team-a", "victim", share(80))
	victim := e.waitIPs(t, "team-a", "victim", 1)

	e.service(t, "team-b", "thief", share(443), annotate(v1alpha1.AnnotationLoadBalancerIPs, victim[0]))
	e.waitEvent(t, "team-b", "thief", "AllocationFailed", "in another namespace")
	e.service(t, "team-b", "guess", share(443))
	if got := e.waitIPs(t, "team-b", "guess", 1); got[0] == victim[0] {
		t.Errorf("a Service of team-b joined team-a's shared address %s", got[0])
	}

	e.service(t, "team-a", "second")
	e.waitIPs(t, "team-a", "second", 1)
	e.service(t, "team-a", "third")
	e.waitEvent(t, "team-a", "third", "AllocationFailed", "NamespaceLimit: namespace team-a already has as many Services as it may in pool(s) web (maxPerNamespace 2)")
	e.service(t, "team-b", "more")
	e.waitIPs(t, "team-b", "more", 1)
	w.expect("team-a refused an address", "VipctlNamespaceAtCap")
	e.deleteService(t, "team-a", "third")
	w.expect("the refused Service deleted")

	// Both addresses of pool tiny given out.
	for _, name := range []string{"tiny-0", "tiny-1"} {
		e.service(t, "team-b", name, annotate(v1alpha1.AnnotationPool, "tiny"))
		e.waitIPs(t, "team-b", name, 1)
	}
	w.expect("pool tiny given out", "VipctlPoolExhausted pool=tiny")
	e.deleteService(t, "team-b", "tiny-1")
	w.expect("an address of pool tiny free again")
}
