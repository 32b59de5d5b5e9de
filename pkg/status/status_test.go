package status

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
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
	if p := (Report{VIPs: rows}).Problems(); len(p) != 1 || p[0] != "1 VIP(s) with no holder or more than one" {
		t.Errorf("split brain: problems %q", p)
	}
	text := Report{VIPs: rows}.Text(since.Add(time.Hour))
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

// TestStatusBGPSessions: the nodes' published sessions become a second
// table, in JSON beside the VIPs, and a session not Established is a
// problem (vipctl status exits 2) while the VIP rows stay ok.
func TestStatusBGPSessions(t *testing.T) {
	c := fixture.Example(t, "bgp-two-racks.yaml")
	since := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	held := v1alpha1.HeldVIPs{{Address: "203.0.113.224", Instance: v1alpha1.BGPKey("racks"), Since: since}}
	node := func(name string, sessions v1alpha1.BGPSessions) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1alpha1.AnnotationNodeVIPs: held.String(), v1alpha1.AnnotationNodeBGPSessions: sessions.String()}}}
	}
	up := func(peer string) v1alpha1.BGPSession {
		return v1alpha1.BGPSession{Peer: peer, ASN: 64512, State: "Established", Since: since, PrefixesSent: 1, BFD: "Up"}
	}
	down := up("203.0.113.1")
	down.State, down.PrefixesSent, down.BFD, down.Dropped = "Active", 0, "Down", 1
	nodes := []corev1.Node{node("worker-b0", v1alpha1.BGPSessions{down}), node("worker-a0", v1alpha1.BGPSessions{up("198.51.100.1")}),
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-x", Annotations: map[string]string{v1alpha1.AnnotationNodeBGPSessions: "{"}}}}
	r, errs := NewReport(c, nodes, []corev1.Service{fixture.LBService("web", "203.0.113.224")})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "node worker-x: annotation vipctl.io/bgp-sessions") {
		t.Errorf("errors %v: want worker-x's unparsable annotation", errs)
	}
	// Only the announced address: the API and ingress VIPs, held by
	// nobody here, are TestStatus's business.
	r.VIPs = slices.DeleteFunc(r.VIPs, func(v VIPStatus) bool { return v.Instance != "bgp/racks" })
	want := "INSTANCE   ADDRESS        HOLDER               STATE  SINCE                             SERVICES\n" +
		"bgp/racks  203.0.113.224  worker-a0,worker-b0  ok     2026-11-23T10:00:00Z (1m30s ago)  default/web\n" +
		"\n" +
		"NODE       PEER          ASN    STATE        SINCE                             PREFIXES  BFD\n" +
		"worker-a0  198.51.100.1  64512  Established  2026-11-23T10:00:00Z (1m30s ago)  1         Up\n" +
		"worker-b0  203.0.113.1   64512  Active       2026-11-23T10:00:00Z (1m30s ago)  0         Down\n"
	if got := r.Text(since.Add(90 * time.Second)); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if p := r.Problems(); len(p) != 1 || p[0] != "BGP session(s) not established: worker-b0→203.0.113.1 Active" {
		t.Errorf("problems %q", p)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"bgpSessions":[{"node":"worker-a0","peer":"198.51.100.1","asn":64512,"state":"Established","since":"2026-11-23T10:00:00Z","prefixesSent":1,"prefixesReceived":0,"dropped":0,"bfd":"Up"}`) {
		t.Errorf("json: %s", s)
	}
	r.BGPSessions[1].State = "Established"
	if p := r.Problems(); len(p) != 0 {
		t.Errorf("every session up, every VIP held once: problems %q", p)
	}
}

// TestStatusUnlisted: a node whose list was too long to publish names
// the instances it holds; it holds each of their addresses (a second
// holder of one another node lists), and no other instance's.
func TestStatusUnlisted(t *testing.T) {
	c := fixture.Example(t, "pools-node-groups.yaml")
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	annotate := func(name string, h v1alpha1.HeldVIPs) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationNodeVIPs: h.String()}}}
	}
	rows, errs := Compute(c, []corev1.Node{
		annotate("master-0", v1alpha1.HeldVIPs{{Instance: "pool/rack-a/0", Since: since, Unlisted: 2000}}),
		annotate("master-1", v1alpha1.HeldVIPs{{Address: "198.51.100.130", Instance: "pool/rack-a/0", Since: since}}),
	}, []corev1.Service{fixture.LBService("a", "198.51.100.130"), fixture.LBService("b", "198.51.100.133"), fixture.LBService("c", "198.51.100.131")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	byAddr := map[string]VIPStatus{}
	for _, r := range rows {
		byAddr[r.Address] = r
	}
	if r := byAddr["198.51.100.133"]; r.Instance != "pool/rack-a/0" || r.State != StateOK || strings.Join(r.Holders, ",") != "master-0" {
		t.Errorf("an address of the unlisted instance: %+v", r)
	}
	if r := byAddr["198.51.100.130"]; r.State != StateSplitBrain || strings.Join(r.Holders, ",") != "master-0,master-1" {
		t.Errorf("listed by master-1 too: %+v", r)
	}
	if r := byAddr["198.51.100.131"]; r.Instance == "pool/rack-a/0" || r.State != StateNoHolder {
		t.Errorf("another instance's address: %+v", r)
	}
}

// TestClassifyIsolated: of two nodes claiming a VIP, the one whose
// kubelet stopped renewing its Lease is isolated, not the other half of
// a split brain; both renewing is a split brain; three holders of which
// one is away stay a split brain; a node without a Lease counts as
// reachable; a claimant silent since a newer claim is away at once.
func TestClassifyIsolated(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	lease := func(node string, ago time.Duration) coordinationv1.Lease {
		return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: NodeLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-ago)}, LeaseDurationSeconds: ptr.To[int32](40)}}
	}
	reach := ReachFromLeases([]coordinationv1.Lease{
		lease("master-0", 3*time.Second), lease("master-1", 16*time.Second), lease("master-2", 14*time.Second), lease("worker-0", time.Second),
	})
	row := func(holders ...string) VIPStatus {
		return VIPStatus{Address: "198.51.100.5", Holders: holders, State: StateSplitBrain}
	}
	rep := Report{VIPs: []VIPStatus{
		row("master-0", "master-1"), // master-1: 16 s > 1.5 × 10 s
		row("master-0", "master-2"), // master-2: 14 s, within
		row("master-0", "master-1", "worker-0"),
		row("master-1", "gone"), // no Lease: reachable
		{Address: "198.51.100.6", Holders: []string{"master-1"}, State: StateOK},
	}}
	rep.Classify(reach, now)
	want := []string{StateIsolated, StateSplitBrain, StateSplitBrain, StateIsolated, StateOK}
	for i, v := range rep.VIPs {
		if v.State != want[i] {
			t.Errorf("row %d %v: state %s, want %s", i, v.Holders, v.State, want[i])
		}
	}
	if got := rep.VIPs[0].Unreachable; !slices.Equal(got, []string{"master-1"}) {
		t.Errorf("unreachable %v", got)
	}
	text := rep.Text(now)
	if !strings.Contains(text, "master-0,master-1(unreachable)") || !strings.Contains(text, "isolated") {
		t.Errorf("table:\n%s", text)
	}
	p := rep.Problems()
	if len(p) != 2 || p[1] != "node(s) not reaching the API, whose claims are from before: master-1" {
		t.Errorf("problems %q", p)
	}
	// A takeover: master-2 claimed first and has not renewed since
	// master-0 claimed (lost without a word, its Lease not overdue yet):
	// isolated at once. worker-0, renewed after master-0's claim, is
	// the other half of a real split brain.
	claimed := func(v VIPStatus, since ...time.Duration) VIPStatus {
		v.holderSince = map[string]time.Time{}
		for i, h := range v.Holders {
			v.holderSince[h] = now.Add(-since[i])
		}
		return v
	}
	rep = Report{VIPs: []VIPStatus{
		claimed(row("master-0", "master-2"), 2*time.Second, time.Hour),
		claimed(row("master-0", "worker-0"), 2*time.Second, time.Hour),
		claimed(row("master-0", "master-2"), time.Hour, 2*time.Second), // master-0 renewed 3 s ago, before master-2's claim
	}}
	rep.Classify(reach, now)
	for i, want := range []struct {
		state string
		away  []string
	}{{StateIsolated, []string{"master-2"}}, {StateSplitBrain, nil}, {StateIsolated, []string{"master-0"}}} {
		if v := rep.VIPs[i]; v.State != want.state || !slices.Equal(v.Unreachable, want.away) {
			t.Errorf("takeover row %d %v: state %s away %v, want %s %v", i, v.Holders, v.State, v.Unreachable, want.state, want.away)
		}
	}
	// Without Leases nothing changes.
	rep = Report{VIPs: []VIPStatus{row("master-0", "master-1")}}
	rep.Classify(Reach{}, now)
	if rep.VIPs[0].State != StateSplitBrain {
		t.Errorf("without Leases: %s", rep.VIPs[0].State)
	}
}

// TestWireNotes: the nodes' vipctl.io/wire views hang on their rows and
// read as findings: a stranger's answer (with the nodes that heard it),
// a held VIP nobody answers, one answered twice. A view older than
// WireViewFresh (a rolled-back sidecar's leftover) and one of nobody
// answering a VIP nobody holds are left out.
func TestWireNotes(t *testing.T) {
	c := fixture.Example(t, "pools-node-groups.yaml")
	api, ingress := c.Spec.API.VIPs[0], c.Spec.Ingress[0].VIPs[0]
	now := time.Now().UTC().Truncate(time.Second)
	node := func(name string, held []string, views ...v1alpha1.WireView) corev1.Node {
		var h v1alpha1.HeldVIPs
		for _, v := range held {
			h = append(h, v1alpha1.HeldVIP{Address: v, Since: now})
		}
		ann := map[string]string{v1alpha1.AnnotationNodeVIPs: h.String()}
		if len(views) > 0 {
			ann[v1alpha1.AnnotationNodeWire] = v1alpha1.WireViews(views).String()
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
	}
	stranger := "02:00:00:00:00:66"
	nodes := []corev1.Node{
		node("master-0", nil, v1alpha1.WireView{Address: api, Answers: 0, At: now},
			v1alpha1.WireView{Address: "198.51.100.130", Answers: 0, At: now}),
		node("master-1", []string{api}, v1alpha1.WireView{Address: ingress, Answers: 2, Strangers: []string{stranger}, At: now}),
		node("master-2", nil, v1alpha1.WireView{Address: api, Answers: 0, At: now},
			v1alpha1.WireView{Address: ingress, Answers: 2, Strangers: []string{stranger}, At: now.Add(-v1alpha1.WireViewFresh - time.Minute)}),
		node("worker-a0", []string{ingress}, v1alpha1.WireView{Address: ingress, Answers: 3, At: now}),
	}
	// 198.51.100.130: a Service's address nobody holds.
	r, errs := NewReport(c, nodes, []corev1.Service{fixture.LBService("a", "198.51.100.130")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	want := []string{
		api + " is held by master-1 and answered by nobody (asked by master-0, master-2)",
		ingress + " is answered by " + stranger + ", which is no member of " + string(v1alpha1.IngressKey(c.Spec.Ingress[0].Name)) + " (heard by master-1)",
		ingress + " is answered more than once (answers heard by worker-a0: 3)",
	}
	got := wireLines(r.VIPs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	text := r.Text(now)
	if !strings.Contains(text, "On the wire") || !strings.Contains(text, want[0]) {
		t.Errorf("table without the findings:\n%s", text)
	}
	if p := r.Problems(); !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, "3 finding(s) on the wire: ") }) {
		t.Errorf("problems %q", p)
	}
	// Every view healthy: nothing said.
	r, _ = NewReport(c, []corev1.Node{node("master-1", []string{api})}, nil)
	if got := wireLines(r.VIPs); len(got) != 0 || strings.Contains(r.Text(now), "On the wire") {
		t.Errorf("findings without views: %q", got)
	}
}
