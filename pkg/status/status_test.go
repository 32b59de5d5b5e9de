package status

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/internal/fixture"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

func TestStatus(t *testing.T) {
	c := fixture.Example(t, "pools-node-groups.yaml")
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
	shared := fixture.LBService("a", "198.51.100.130")
	shared2 := fixture.LBService("b", "198.51.100.130")
	rows, errs := Compute(c, []corev1.Node{node("master-0", api, "198.51.100.130"), node("worker-a0", ingress), node("worker-a1", ingress)},
		[]corev1.Service{shared, shared2, fixture.LBService("pending")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	byAddr := map[string]VIPStatus{}
	for _, r := range rows {
		byAddr[r.Address] = r
	}
	if r := byAddr[api]; r.State != StateOK || r.Instance != "api" || r.Holders[0] != "master-0" || !r.Since.Equal(since) {
		t.Errorf("api row %+v", r)
	}
	if r := byAddr[ingress]; r.State != StateSplitBrain || r.Instance != string(v1alpha1.IngressKey(c.Spec.Ingress[0].Name)) {
		t.Errorf("ingress held by two nodes: %+v", r)
	}
	if r := byAddr["198.51.100.130"]; r.Instance != "pool/rack-a/0" || strings.Join(r.Services, ",") != "default/a,default/b" || r.State != StateOK {
		t.Errorf("pool row %+v", r)
	}
	if Healthy(rows) {
		t.Errorf("split brain reported healthy")
	}
	text := Text(rows, since.Add(time.Hour))
	if !strings.Contains(text, "INSTANCE") || !strings.Contains(text, "split-brain") || !strings.Contains(text, "(1h0m0s ago)") {
		t.Errorf("table:\n%s", text)
	}
	// Nobody holds anything: every row is no-holder.
	rows, _ = Compute(c, nil, nil)
	for _, r := range rows {
		if r.State != StateNoHolder {
			t.Errorf("%+v", r)
		}
	}
}

// TestStatusBGP: a bgp pool's address announced by several nodes is ok,
// under its bgp/<pool> key, with every announcing node listed.
func TestStatusBGP(t *testing.T) {
	c := fixture.Example(t, "bgp-two-racks.yaml")
	held := v1alpha1.HeldVIPs{{Address: "203.0.113.224", Instance: v1alpha1.BGPKey("racks")}}
	node := func(name string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationNodeVIPs: held.String()}}}
	}
	rows, errs := Compute(c, []corev1.Node{node("worker-a0"), node("worker-b0")}, []corev1.Service{fixture.LBService("web", "203.0.113.224")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	for _, r := range rows {
		if r.Address != "203.0.113.224" {
			continue
		}
		if r.Instance != "bgp/racks" || r.State != StateOK || strings.Join(r.Holders, ",") != "worker-a0,worker-b0" {
			t.Errorf("bgp row %+v", r)
		}
		return
	}
	t.Errorf("no row for the bgp address: %+v", rows)
}
