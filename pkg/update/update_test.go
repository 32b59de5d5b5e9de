package update

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
)

const example = "../../examples/pools-node-groups.yaml"

func load(t *testing.T) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Load(example)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func loadText(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func lbService(name string, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestEditsAndPlan(t *testing.T) {
	live := load(t)
	liveIDs, err := vrid.ForCluster(live)
	if err != nil {
		t.Fatal(err)
	}
	// Remove the first pool and add one: the remaining pool keeps its IDs
	// although its position changed, the new one gets free IDs.
	_, desired, err := ApplyEdits(loadText(t), []Edit{{Op: "remove", Spec: "rack-a"}, {Op: "add", Spec: "new=198.51.100.64/27"}})
	if err != nil {
		t.Fatal(err)
	}
	svcs := []corev1.Service{lbService("web", "198.51.100.130"), lbService("edge", "203.0.113.70")}
	p, err := Compute(live, desired, svcs)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := vrid.ForCluster(p.Desired)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pool/edge/0", "pool/edge/1"} {
		if ids[k] != liveIDs[k] {
			t.Errorf("%s renumbered %d -> %d", k, liveIDs[k], ids[k])
		}
	}
	used := map[uint8]string{}
	for k, id := range ids {
		if prev, dup := used[id]; dup {
			t.Errorf("ID %d for %s and %s", id, k, prev)
		}
		used[id] = k
	}
	text := p.Text()
	for _, want := range []string{"+ pool new (VRRP IDs pool/new/0=", "- pool rack-a", "! Service default/web would lose 198.51.100.130", "no MachineConfig change"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	if len(p.Orphans) != 1 || p.Orphans[0].Service != "default/web" {
		t.Errorf("orphans %+v, want default/web only (edge's address is still in a pool)", p.Orphans)
	}

	// Resizing: the changed field is named.
	_, resized, err := ApplyEdits(loadText(t), []Edit{{Op: "set", Spec: "edge=203.0.113.64/28"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err = Compute(live, resized, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Pools) != 1 || p.Pools[0].Change != "changed" || !strings.Contains(strings.Join(p.Pools[0].Fields, ";"), "addresses") {
		t.Errorf("resize plan %+v", p.Pools)
	}

	// A static change is called out.
	moved := *live
	moved.Spec.API.VIPs = []string{"198.51.100.9"}
	p, err = Compute(live, &moved, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Static, ",") != "spec.api" || !strings.Contains(p.Text(), "reboot") {
		t.Errorf("static change: %v\n%s", p.Static, p.Text())
	}

	// No ConfigMap yet: create.
	p, err = Compute(nil, live, nil)
	if err != nil || !p.Create {
		t.Errorf("first update: %+v %v", p, err)
	}
}

func TestBadEditsRefused(t *testing.T) {
	live := loadText(t)
	cases := []struct {
		edit Edit
		want string
	}{
		{Edit{Op: "add", Spec: "x=198.51.100.0/33"}, `spec.servicePools[2].addresses[0]: Invalid value: "198.51.100.0/33"`},
		{Edit{Op: "add", Spec: "x=198.51.100.130/32"}, "overlaps spec.servicePools[0].addresses[0]"},
		{Edit{Op: "add", Spec: "rack-a=198.51.100.64/27"}, "pool rack-a exists"},
		{Edit{Op: "set", Spec: "nope=198.51.100.64/27"}, "no pool nope"},
		{Edit{Op: "remove", Spec: "nope"}, "no pool nope"},
		{Edit{Op: "add", Spec: "x"}, "want NAME=CIDR|RANGE"},
		{Edit{Op: "add", Spec: "x=198.51.100.5/32"}, "inside service pool"},
	}
	for _, tc := range cases {
		_, _, err := ApplyEdits(live, []Edit{tc.edit})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.edit, err, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	c := load(t)
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	node := func(name string, vips ...string) corev1.Node {
		var h v1alpha1.HeldVIPs
		for _, v := range vips {
			h = append(h, v1alpha1.HeldVIP{Address: v, Since: since})
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationNodeVIPs: h.String()}}}
	}
	api := c.Spec.API.VIPs[0]
	ingress := c.Spec.Ingress[0].VIPs[0]
	shared := lbService("a", "198.51.100.130")
	shared2 := lbService("b", "198.51.100.130")
	rows, errs := Status(c, []corev1.Node{node("master-0", api, "198.51.100.130"), node("worker-a0", ingress), node("worker-a1", ingress)},
		[]corev1.Service{shared, shared2, lbService("pending")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	byAddr := map[string]VIPStatus{}
	for _, r := range rows {
		byAddr[r.Address] = r
	}
	if r := byAddr[api]; r.State != StateOK || r.Kind != "api" || r.Holders[0] != "master-0" || !r.Since.Equal(since) {
		t.Errorf("api row %+v", r)
	}
	if r := byAddr[ingress]; r.State != StateSplitBrain {
		t.Errorf("ingress held by two nodes: %+v", r)
	}
	if r := byAddr["198.51.100.130"]; r.Kind != "pool/rack-a" || strings.Join(r.Services, ",") != "default/a,default/b" || r.State != StateOK {
		t.Errorf("pool row %+v", r)
	}
	if Healthy(rows) {
		t.Errorf("split brain reported healthy")
	}
	text := StatusText(rows, since.Add(time.Hour))
	if !strings.Contains(text, "KIND") || !strings.Contains(text, "split-brain") || !strings.Contains(text, "(1h0m0s ago)") {
		t.Errorf("table:\n%s", text)
	}
	// Nobody holds anything: every row is no-holder.
	rows, _ = Status(c, nil, nil)
	for _, r := range rows {
		if r.State != StateNoHolder {
			t.Errorf("%+v", r)
		}
	}
}
