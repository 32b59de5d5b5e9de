package sidecar

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// TestStrangers: an answer is a stranger's unless a member has its
// link-layer address or it is keepalived's virtual MAC; while a peer of
// the VIP's instance is silent nobody is called a stranger, while a peer
// of another instance is, the VIP's instance still tells.
func TestStrangers(t *testing.T) {
	m := memberMACs{byMAC: map[string]string{"02:00:00:00:00:01": "master-0 (this node)", "02:00:00:00:00:02": "198.51.100.12"}}
	heard := []net.HardwareAddr{mac("02:00:00:00:00:02"), mac("02:00:00:00:00:66"), mac("00:00:5e:00:01:33"), mac("00:00:5e:00:02:33")}
	peers := []netip.Addr{netip.MustParseAddr("198.51.100.12"), netip.MustParseAddr("198.51.100.13")}
	got := m.strangers(heard, peers)
	if len(got) != 1 || got[0].String() != "02:00:00:00:00:66" {
		t.Errorf("strangers %v, want only 02:00:00:00:00:66", got)
	}
	m.silent = []netip.Addr{netip.MustParseAddr("198.51.100.14")}
	if got := m.strangers(heard, peers); len(got) != 1 {
		t.Errorf("strangers %v with another instance's peer silent, want the stranger", got)
	}
	m.silent = append(m.silent, netip.MustParseAddr("198.51.100.13"))
	if got := m.strangers(heard, peers); len(got) != 0 {
		t.Errorf("strangers %v with a peer of the VIP's instance silent, want none", got)
	}
}

// TestAnswerCollector: a series per asked address, none for an address
// no longer asked (even set by a pass that began before), and none for a
// zero count where zeros are left out.
func TestAnswerCollector(t *testing.T) {
	a, b, c := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("198.51.100.6"), netip.MustParseAddr("198.51.100.7")
	all := newAnswerCollector("answers", "help", false)
	some := newAnswerCollector("strangers", "help", true)
	for _, col := range []*AnswerCollector{all, some} {
		col.keep([]netip.Addr{a, b})
		col.set(a, 1)
		col.set(b, 0)
		col.set(c, 2) // not asked for
	}
	if n := testutil.CollectAndCount(all); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
	if n := testutil.CollectAndCount(some); n != 1 {
		t.Errorf("%d series leaving out zeros, want 1", n)
	}
	all.keep([]netip.Addr{b})
	if _, ok := all.Get(a); ok || testutil.CollectAndCount(all) != 1 {
		t.Errorf("%s kept after it was no longer asked for", a)
	}
	if got := sortedSet([]netip.Addr{c, a, c, b}); !slices.Equal(got, []netip.Addr{a, b, c}) {
		t.Errorf("sortedSet: %v", got)
	}
}

// TestPublishWire: a finding reaches the Node's annotation only when two
// passes in a row found it (a planned handover's moment of two answers
// does not), is not written again while unchanged, goes when the wire
// is healthy again, and is removed as the sidecar stops.
func TestPublishWire(t *testing.T) {
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a0"}})
	s := &Sidecar{o: Options{OnceOptions: runtimecfg.OnceOptions{NodeName: "a0"}, Client: kube}, log: slog.New(slog.DiscardHandler), m: NewMetrics(nil)}
	ctx := context.Background()
	annotation := func() string {
		n, err := kube.CoreV1().Nodes().Get(ctx, "a0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations[v1alpha1.AnnotationNodeWire]
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
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	twice := v1alpha1.WireView{Address: "198.51.100.5", Answers: 2, At: at}
	pass := func(views ...v1alpha1.WireView) {
		t.Helper()
		if err := s.publishWire(ctx, views); err != nil {
			t.Fatal(err)
		}
	}
	pass(twice)
	if got := annotation(); got != "" {
		t.Errorf("one pass's finding published: %s", got)
	}
	pass() // the handover is over
	pass(twice)
	if got := annotation(); got != "" {
		t.Errorf("a finding of two passes apart published: %s", got)
	}
	pass(twice)
	if got := annotation(); !strings.Contains(got, `"address":"198.51.100.5","answers":2`) {
		t.Errorf("a finding of two passes in a row: annotation %q", got)
	}
	before := patches()
	pass(twice)
	if patches() != before {
		t.Errorf("an unchanged finding written again within %s", v1alpha1.WireViewRepublish)
	}
	pass()
	if got := annotation(); got != "" {
		t.Errorf("healthy again, yet the Node says %s", got)
	}
	pass(twice)
	pass(twice)
	s.unpublishWire()
	if got := annotation(); got != "" {
		t.Errorf("the sidecar stopped, yet the Node says %s", got)
	}
}
