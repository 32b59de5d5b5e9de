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
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestPlanNamesLostExternalIPs: an edit that stops a pool announcing the
// external IPs Services name (externalIPs off, a namespace no longer
// admitted) lists those Services as orphans, with why, so update refuses
// it without --force; an address the pool keeps announcing, or one it
// never did, is no orphan.
func TestPlanNamesLostExternalIPs(t *testing.T) {
	t.Parallel()
	live := fixture.Example(t, "compact-ipv4.yaml")
	live.Spec.ServicePools[0].ExternalIPs = true
	live.Spec.ServicePools[0].Namespaces = []string{"team", "web"} // externalIPs needs them
	first, err := Compute(nil, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := v1alpha1.ParseAddressRange(first.Desired.Spec.ServicePools[0].Addresses[0])
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.First.String(), r.First.Next().String()
	svc := func(ns, name string, ips ...string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: ips}}
	}
	svcs := []corev1.Service{svc("web", "ext", a), svc("team", "other", b), svc("web", "elsewhere", "203.0.113.250")}

	off := fixture.Example(t, "compact-ipv4.yaml")
	p, err := Compute(first.Desired, off, svcs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range p.Orphans {
		got = append(got, o.Service+" "+strings.Join(o.Addresses, ",")+": "+o.Reason)
	}
	want := []string{"team/other " + b + ": " + ReasonExternalIPOff, "web/ext " + a + ": " + ReasonExternalIPOff}
	if !slices.Equal(got, want) {
		t.Errorf("externalIPs off: orphans\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(p.Text(), "! Service web/ext would lose "+a) {
		t.Errorf("the plan's text does not name web/ext:\n%s", p.Text())
	}
	// Refused without --force; with it the Services are left as their
	// owners wrote them and told in an Event.
	if err := (Cluster{}).Apply(context.Background(), p, nil, false, io.Discard); !errors.Is(err, ErrOrphans) {
		t.Errorf("without --force: %v, want ErrOrphans", err)
	}
	kube := fake.NewClientset(&svcs[0], &svcs[1], &svcs[2])
	var out strings.Builder
	if err := (Cluster{Kube: kube, Namespace: "vipctl-system"}).Apply(context.Background(), p, nil, true, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no longer announcing external IP "+a+" of Service web/ext\n") {
		t.Errorf("apply output:\n%s", out.String())
	}
	ext, err := kube.CoreV1().Services("web").Get(context.Background(), "ext", metav1.GetOptions{})
	if err != nil || !slices.Equal(ext.Spec.ExternalIPs, []string{a}) {
		t.Errorf("web/ext after --force: %v (err %v), want its spec.externalIPs untouched", ext.Spec.ExternalIPs, err)
	}
	evs, err := kube.CoreV1().Events("web").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(evs.Items) != 1 || !strings.HasPrefix(evs.Items[0].Message, "vipctl update --force: external IP "+a+" no longer announced") {
		t.Errorf("events in web: %+v (err %v)", evs.Items, err)
	}

	narrowed := fixture.Example(t, "compact-ipv4.yaml")
	narrowed.Spec.ServicePools[0].ExternalIPs = true
	narrowed.Spec.ServicePools[0].Namespaces = []string{"web"}
	if p, err = Compute(first.Desired, narrowed, svcs); err != nil {
		t.Fatal(err)
	}
	if len(p.Orphans) != 1 || p.Orphans[0].Service != "team/other" || !strings.Contains(p.Orphans[0].Reason, "admits Services of namespaces web only") {
		t.Errorf("namespaces narrowed: orphans %+v, want team/other alone, refused by namespace", p.Orphans)
	}
}

// TestPlanRefusesExternalIPsForEveryone: update refuses to write a pool
// whose external IPs any namespace's Services could claim, as validate
// and render refuse the file (CVE-2020-8554).
func TestPlanRefusesExternalIPsForEveryone(t *testing.T) {
	t.Parallel()
	open := fixture.Example(t, "compact-ipv4.yaml")
	open.Spec.ServicePools[0].ExternalIPs = true
	_, err := Compute(nil, open, nil)
	want := `spec.servicePools[0].namespaces: Required value: externalIPs: true lets Services of these namespaces claim the pool's addresses in spec.externalIPs; without namespaces every tenant could (CVE-2020-8554)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Compute: %v, want %s", err, want)
	}
}

// TestPlanIgnoresMetadataLabels: metadata.labels and annotations stay in
// the file (v1alpha1.Shipped), so editing them is no static change that
// would roll the nodes.
func TestPlanIgnoresMetadataLabels(t *testing.T) {
	t.Parallel()
	live := fixture.Example(t, "compact-ipv4.yaml")
	desired := fixture.Example(t, "compact-ipv4.yaml")
	desired.Metadata.Annotations = map[string]string{"note": "edited"}
	desired.Metadata.Labels = map[string]string{"team": "net"}
	p, err := Compute(live, desired, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Static) > 0 {
		t.Errorf("static changes %v, want none", p.Static)
	}
}
