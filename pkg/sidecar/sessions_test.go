package sidecar

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// TestPublishSessions runs the sidecar's sessions step against a vtysh
// that prints the captured FRR output and a fake API: the Node's
// annotation is written when a session changes, not on every read, the
// per-peer metrics follow, and both go when the node has no bgp pool.
func TestPublishSessions(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	run := filepath.Join(root, onnode.FRRRunDir)
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "bgpd.vty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "neighbors.json")
	use := func(file string) {
		b, err := os.ReadFile(filepath.Join("..", "frr", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vtysh := filepath.Join(root, "vtysh")
	if err := os.WriteFile(vtysh, []byte("#!/bin/sh\nexec cat "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a0"}})
	m := NewMetrics(nil)
	s := &Sidecar{
		o:   Options{OnceOptions: runtimecfg.OnceOptions{Target: host.Target{Root: root, Vtysh: vtysh}, NodeName: "a0"}, Client: kube},
		log: slog.New(slog.DiscardHandler), m: m, bgp: true, rendered: true,
	}
	ctx := context.Background()
	annotation := func() (string, bool) {
		n, err := kube.CoreV1().Nodes().Get(ctx, "a0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Annotations[v1alpha1.AnnotationNodeBGPSessions]
		return v, ok
	}
	patches := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "patch" {
				n++
			}
		}
		return n
	}
	step := func() {
		t.Helper()
		if err := s.publishSessions(ctx); err != nil {
			t.Fatal(err)
		}
	}

	use("bgp-neighbors-established-bfd.json")
	for range 3 {
		step()
	}
	v, _ := annotation()
	got, err := v1alpha1.ParseBGPSessions(v)
	if err != nil || len(got) != 1 || !got[0].Established() || got[0].PrefixesSent != 1 || got[0].BFD != "Up" || got[0].ASN != 64512 {
		t.Fatalf("annotation %q (%v): want 198.51.100.1 Established, 1 prefix sent, BFD Up", v, err)
	}
	if n := patches(); n != 1 {
		t.Errorf("%d patches for 3 reads of the same sessions, want 1", n)
	}
	if up, pfx, bfd := testutil.ToFloat64(m.BGP.Up.WithLabelValues("198.51.100.1")), testutil.ToFloat64(m.BGP.Announced.WithLabelValues("198.51.100.1")),
		testutil.ToFloat64(m.BGP.BFDUp.WithLabelValues("198.51.100.1")); up != 1 || pfx != 1 || bfd != 1 {
		t.Errorf("session_up %v, announced_prefixes %v, bfd_up %v; want 1, 1, 1", up, pfx, bfd)
	}

	use("bgp-neighbors-router-gone-bfd.json")
	step()
	step()
	v, _ = annotation()
	if got, _ := v1alpha1.ParseBGPSessions(v); len(got) != 1 || got[0].State != "Active" || got[0].Dropped != 1 || got[0].BFD != "Down" {
		t.Errorf("after the router went: %q, want Active, 1 drop, BFD Down", v)
	}
	if n := patches(); n != 2 {
		t.Errorf("%d patches, want 2 (one per change)", n)
	}
	if up, drops := testutil.ToFloat64(m.BGP.Up.WithLabelValues("198.51.100.1")), testutil.ToFloat64(m.BGP.Drops.WithLabelValues("198.51.100.1")); up != 0 || drops != 1 {
		t.Errorf("session_up %v, session_drops_total %v; want 0, 1", up, drops)
	}

	// bgpd crashed: vtysh says so (exactly FRR 8.4's words) and fails.
	// The session was Active already; now nobody can say: Unknown.
	if err := os.WriteFile(vtysh, []byte("#!/bin/sh\necho 'bgpd is not running'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.publishSessions(ctx); err == nil || !strings.Contains(err.Error(), "bgpd is not running") {
		t.Errorf("bgpd down: err %v, want vtysh's message", err)
	}
	v, _ = annotation()
	if got, _ := v1alpha1.ParseBGPSessions(v); len(got) != 1 || got[0].State != v1alpha1.BGPStateUnknown || got[0].Peer != "198.51.100.1" {
		t.Errorf("bgpd down: %q, want 198.51.100.1 Unknown", v)
	}

	s.bgp = false
	step()
	if v, ok := annotation(); ok {
		t.Errorf("no bgp pool any more, the annotation stays: %q", v)
	}
	if n := testutil.CollectAndCount(m.BGP.Up); n != 0 {
		t.Errorf("%d session_up series left without bgp", n)
	}
}

// TestBGPMetricsDocumented: every per-session series the sidecar exposes
// on /metrics is in docs/runtimecfg.md's list under the name it has.
func TestBGPMetricsDocumented(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observeSessions(nil, v1alpha1.BGPSessions{{Peer: "198.51.100.1", ASN: 64512, State: "Established", Dropped: 1, PrefixesSent: 2, BFD: "Up"}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "runtimecfg.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "vipctl_bgp_") {
			continue
		}
		n++
		if !strings.Contains(string(doc), "`"+f.GetName()+"{peer}`") {
			t.Errorf("%s is not in docs/runtimecfg.md", f.GetName())
		}
	}
	if n != 5 {
		t.Errorf("%d vipctl_bgp_ metrics exposed, want 5", n)
	}
}
