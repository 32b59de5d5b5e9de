package sidecar

import (
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// TestHealUnheard: the holder of a VIP every other member of its
// instance hears nobody answer for announces it again, steps down (its
// instance's track file 1) once they still hear nobody after
// stepDownAfter, and is eligible again (0) after healHold. A member that
// hears an answer, a view gone stale, a VIP this node does not hold or an
// instance that cannot step down leave everything alone.
func TestHealUnheard(t *testing.T) {
	vip, other := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("198.51.100.6")
	peers := []netip.Addr{netip.MustParseAddr("198.51.100.12"), netip.MustParseAddr("198.51.100.13")}
	now := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	node := func(name string, addr netip.Addr, views ...v1alpha1.WireView) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}}}}
		if len(views) > 0 {
			n.Annotations = map[string]string{v1alpha1.AnnotationNodeWire: v1alpha1.WireViews(views).String()}
		}
		return n
	}
	none := func(a netip.Addr, at time.Time) v1alpha1.WireView {
		return v1alpha1.WireView{Address: a.String(), Answers: 0, At: at}
	}
	tg := wireTargets{iface: "no-such-interface", instances: map[netip.Addr]string{vip: "api_v4"},
		peersOf: map[netip.Addr][]netip.Addr{vip: peers, other: peers}}
	held := map[netip.Addr]bool{vip: true, other: true}

	setup := func(t *testing.T, nodes ...*corev1.Node) (*Sidecar, *record.FakeRecorder) {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, n := range append(nodes, node("master-0", netip.MustParseAddr("198.51.100.11"), none(vip, now))) {
			if err := idx.Add(n); err != nil {
				t.Fatal(err)
			}
		}
		rec := record.NewFakeRecorder(10)
		s := &Sidecar{o: Options{OnceOptions: runtimecfg.OnceOptions{NodeName: "master-0", Target: host.Target{Root: t.TempDir()}}, WireInterval: time.Second},
			log: slog.New(slog.DiscardHandler), m: NewMetrics(nil), rec: rec, nodes: cache.NewGenericLister(idx, schema.GroupResource{Resource: "nodes"})}
		return s, rec
	}
	flag := func(s *Sidecar) string {
		b, err := os.ReadFile(s.o.Path(onnode.UnheardFile("api_v4")))
		if err != nil {
			return "absent"
		}
		return strings.TrimSpace(string(b))
	}
	events := func(rec *record.FakeRecorder) []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}

	t.Run("unheard", func(t *testing.T) {
		s, rec := setup(t, node("master-1", peers[0], none(vip, now)), node("master-2", peers[1], none(vip, now.Add(-time.Minute))))
		pass := time.Second
		s.heal(tg, held, now, pass)
		if got := events(rec); len(got) != 1 || !strings.Contains(got[0], ReasonVIPReannounced) || !strings.Contains(got[0], "198.51.100.5") {
			t.Errorf("first pass: Events %q, want one %s naming the VIP", got, ReasonVIPReannounced)
		}
		if flag(s) != "absent" {
			t.Errorf("stepped down at the first pass: the file says %s", flag(s))
		}
		s.heal(tg, held, now.Add(s.stepDownAfter(pass)-time.Second), pass)
		if flag(s) != "absent" || len(events(rec)) != 0 {
			t.Errorf("stepped down before the others asked again: the file says %s", flag(s))
		}
		s.heal(tg, held, now.Add(s.stepDownAfter(pass)), pass)
		if got := events(rec); flag(s) != "1" || len(got) != 1 || !strings.Contains(got[0], ReasonVIPSteppedDown) {
			t.Errorf("still unheard after stepDownAfter: the file says %s, Events %q", flag(s), got)
		}
		later := now.Add(s.stepDownAfter(pass) + healHold)
		s.heal(tg, held, later.Add(-time.Second), pass)
		if flag(s) != "1" {
			t.Errorf("eligible again before the hold ended: the file says %s", flag(s))
		}
		s.heal(tg, held, later, pass)
		if flag(s) != "0" {
			t.Errorf("still down after the hold: the file says %s", flag(s))
		}
		for action, want := range map[string]float64{"reannounce": 1, "step-down": 1, "step-down-ended": 1} {
			if got := testutil.ToFloat64(s.m.Heal.WithLabelValues(action)); got != want {
				t.Errorf("vipctl_heal_actions_total{action=%q} = %v, want %v", action, got, want)
			}
		}
	})

	t.Run("heard for a moment", func(t *testing.T) {
		silent := []*corev1.Node{node("master-1", peers[0], none(vip, now)), node("master-2", peers[1], none(vip, now))}
		s, rec := setup(t, silent...)
		pass := time.Second
		s.heal(tg, held, now, pass)
		events(rec)
		// One member hears an answer at the next pass (the
		// announcement's own gratuitous ARP), then nobody again.
		lister := func(nodes ...*corev1.Node) {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, n := range nodes {
				_ = idx.Add(n)
			}
			s.nodes = cache.NewGenericLister(idx, schema.GroupResource{Resource: "nodes"})
		}
		lister(node("master-1", peers[0]), node("master-2", peers[1], none(vip, now)))
		s.heal(tg, held, now.Add(3*time.Second), pass)
		lister(node("master-1", peers[0], none(vip, now.Add(6*time.Second))), node("master-2", peers[1], none(vip, now.Add(6*time.Second))))
		s.heal(tg, held, now.Add(6*time.Second), pass)
		if got := events(rec); len(got) != 0 {
			t.Errorf("unheard again within the wait: Events %q, want none (no second announcement)", got)
		}
		s.heal(tg, held, now.Add(s.stepDownAfter(pass)), pass)
		if got := events(rec); flag(s) != "1" || len(got) != 1 || !strings.Contains(got[0], ReasonVIPSteppedDown) {
			t.Errorf("still unheard when the first announcement's wait ended: the file says %s, Events %q", flag(s), got)
		}
		if got := testutil.ToFloat64(s.m.Heal.WithLabelValues("reannounce")); got != 1 {
			t.Errorf("vipctl_heal_actions_total{action=\"reannounce\"} = %v, want 1", got)
		}
	})

	t.Run("heard again", func(t *testing.T) {
		s, rec := setup(t, node("master-1", peers[0], none(vip, now)), node("master-2", peers[1], none(vip, now)))
		s.heal(tg, held, now, time.Second)
		events(rec)
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		_ = idx.Add(node("master-1", peers[0]))
		_ = idx.Add(node("master-2", peers[1], none(vip, now)))
		s.nodes = cache.NewGenericLister(idx, schema.GroupResource{Resource: "nodes"})
		s.heal(tg, held, now.Add(time.Hour), time.Second)
		if got := events(rec); flag(s) != "absent" || len(got) != 0 {
			t.Errorf("heard by one member again, yet the file says %s, Events %q", flag(s), got)
		}
	})

	for _, c := range []struct {
		name  string
		nodes []*corev1.Node
		held  map[netip.Addr]bool
	}{
		{"one member hears an answer", []*corev1.Node{node("master-1", peers[0], none(vip, now)), node("master-2", peers[1])}, held},
		{"a view gone stale", []*corev1.Node{node("master-1", peers[0], none(vip, now)), node("master-2", peers[1], none(vip, now.Add(-v1alpha1.WireViewFresh)))}, held},
		{"not held here", []*corev1.Node{node("master-1", peers[0], none(vip, now)), node("master-2", peers[1], none(vip, now))}, map[netip.Addr]bool{other: true}},
		{"an instance that cannot step down", []*corev1.Node{node("master-1", peers[0], none(other, now)), node("master-2", peers[1], none(other, now))}, held},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rec := setup(t, c.nodes...)
			s.heal(tg, c.held, now, time.Second)
			s.heal(tg, c.held, now.Add(time.Hour), time.Second)
			if got := events(rec); flag(s) != "absent" || len(got) != 0 {
				t.Errorf("the file says %s, Events %q: want nothing done", flag(s), got)
			}
		})
	}
}
