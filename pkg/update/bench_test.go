package update

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// BenchmarkComputePlan5000 is `vipctl update`'s plan at the scale the
// performance issue names: 5000 LoadBalancer Services over 20 pools, one
// pool removed and one added, so every Service's addresses are checked
// against the desired pools for orphans.
func BenchmarkComputePlan5000(b *testing.B) {
	live := &v1alpha1.ClusterVIPs{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Metadata: v1alpha1.ObjectMeta{Name: "scale"}}
	live.Spec.BaseDomain = "example.test"
	live.Spec.MachineNetworks = []string{"2001:db8:1::/64"}
	live.Spec.API.VIPs = []string{"2001:db8:1::5"}
	live.Spec.Ingress = []v1alpha1.IngressSpec{{Name: "default", Domain: "apps.example.test", VIPs: []string{"2001:db8:1::6"}}}
	var services []corev1.Service
	for p := 0; p < 20; p++ {
		cidr := fmt.Sprintf("2001:db8:1::%x:0/112", 0x100+p)
		live.Spec.ServicePools = append(live.Spec.ServicePools, v1alpha1.ServicePool{Name: fmt.Sprintf("pool-%d", p), Addresses: []string{cidr}})
		a := netip.MustParsePrefix(cidr).Addr()
		for i := 0; i < 250; i++ {
			a = a.Next()
			s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("svc-%d-%d", p, i)}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: a.String()}}
			services = append(services, s)
		}
	}
	v1alpha1.SetDefaults(live)
	if errs := v1alpha1.Validate(live); len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	desired := *live
	desired.Spec.ServicePools = append(append([]v1alpha1.ServicePool(nil), live.Spec.ServicePools[1:]...),
		v1alpha1.ServicePool{Name: "new", Addresses: []string{"2001:db8:1::200:0/112"}})
	v1alpha1.SetDefaults(&desired)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := Compute(live, &desired, services)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Orphans) != 250 {
			b.Fatalf("%d orphans, want the removed pool's 250", len(p.Orphans))
		}
	}
}
