package update

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestPlanNamesServicesTheClassDrops: an edit of spec.loadBalancerClass
// that stops vipctl serving Services with an address (only: true leaves
// those without a class, a new name those of the old one) lists them as
// orphans, so update refuses it without --force; Services it still
// serves, and those without an address yet, are no orphans.
func TestPlanNamesServicesTheClassDrops(t *testing.T) {
	t.Parallel()
	first, err := Compute(nil, fixture.Example(t, "compact-ipv4.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := v1alpha1.ParseAddressRange(first.Desired.Spec.ServicePools[0].Addresses[0])
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.First.String(), r.First.Next().String()
	ours := v1alpha1.LoadBalancerClass
	svc := func(name string, class *string, ips ...string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	svcs := []corev1.Service{svc("plain", nil, a), svc("classed", &ours, b), svc("pending", nil)}
	orphans := func(spec *v1alpha1.LoadBalancerClassSpec) (*Plan, []string) {
		t.Helper()
		desired := fixture.Example(t, "compact-ipv4.yaml")
		desired.Spec.LoadBalancerClass = spec
		p, err := Compute(first.Desired, desired, svcs)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range p.Orphans {
			got = append(got, o.Service+" "+strings.Join(o.Addresses, ","))
		}
		return p, got
	}
	p, got := orphans(&v1alpha1.LoadBalancerClassSpec{Only: true})
	if want := []string{"web/plain " + a}; !slices.Equal(got, want) {
		t.Errorf("only: true: orphans %q, want %q", got, want)
	}
	if !strings.Contains(p.Text(), "! Service web/plain would lose "+a) || !strings.Contains(p.Text(), "class vipctl.io/keepalived only") {
		t.Errorf("the plan's text does not say why web/plain loses its address:\n%s", p.Text())
	}
	if err := (Cluster{}).Apply(context.Background(), p, nil, false, io.Discard); !errors.Is(err, ErrOrphans) {
		t.Errorf("without --force: %v, want ErrOrphans", err)
	}
	if _, got := orphans(&v1alpha1.LoadBalancerClassSpec{Name: "example.com/lb"}); !slices.Equal(got, []string{"web/classed " + b}) {
		t.Errorf("a new class name: orphans %q, want web/classed alone", got)
	}
	if _, got := orphans(&v1alpha1.LoadBalancerClassSpec{Name: ours}); len(got) != 0 {
		t.Errorf("the default class spelt out: orphans %q, want none", got)
	}
}
