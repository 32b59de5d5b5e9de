package sidecar

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestHeldIncludesAnnouncedRoutes: a bgp pool's addresses sit on no
// interface, yet the node publishes those its applied frr.conf
// announces, under bgp/<pool>, beside the VRRP VIPs it holds.
func TestHeldIncludesAnnouncedRoutes(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "bgp-two-racks.yaml")
	ingress := netip.MustParseAddr(c.Spec.Ingress[0].VIPs[0])
	announced := netip.MustParseAddr("203.0.113.224")
	s := &Sidecar{
		o:     Options{Addresses: func() ([]netip.Addr, error) { return []netip.Addr{ingress, netip.MustParseAddr("198.51.100.21")}, nil }},
		since: map[netip.Addr]time.Time{},
	}
	st := cluster.State{ServiceVIPs: map[string][]netip.Addr{"racks": {announced, netip.MustParseAddr("203.0.113.225")}}}
	s.rememberVIPs(cluster.Compile(c), st)
	s.rememberAnnounced([]onnode.Announced{{Pool: "racks", Addrs: []netip.Addr{announced}}})
	held, err := s.Held()
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held[0].Address != ingress.String() || held[0].Instance != "ingress" ||
		held[1].Address != announced.String() || held[1].Instance != "bgp/racks" {
		t.Errorf("held = %+v; want the ingress VIP and 203.0.113.224 under bgp/racks (not 203.0.113.225: not announced here)", held)
	}
}

// heldSeries is what vip_held exposes at a scrape, by vip and via.
func heldSeries(t *testing.T, c *HeldCollector) map[[2]string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var l [2]string
			for _, p := range m.GetLabel() {
				switch p.GetName() {
				case "vip":
					l[0] = p.GetValue()
				case "via":
					l[1] = p.GetValue()
				}
			}
			out[l] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestVIPHeldSeries: every VIP of the cluster has a vip_held series on
// every node, 1 where held, so that the rules can count holders (none, or
// two for a VRRP VIP); a bgp pool's address says via="bgp", which may
// have many holders; a VIP gone from the config loses its series.
func TestVIPHeldSeries(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "bgp-two-racks.yaml")
	ingress := netip.MustParseAddr(c.Spec.Ingress[0].VIPs[0])
	api := netip.MustParseAddr(c.Spec.API.VIPs[0])
	announced := netip.MustParseAddr("203.0.113.224")
	s := &Sidecar{
		o:     Options{Addresses: func() ([]netip.Addr, error) { return []netip.Addr{ingress}, nil }},
		since: map[netip.Addr]time.Time{},
	}
	st := cluster.State{ServiceVIPs: map[string][]netip.Addr{"racks": {announced}}}
	s.rememberVIPs(cluster.Compile(c), st)
	s.rememberAnnounced([]onnode.Announced{{Pool: "racks", Addrs: []netip.Addr{announced}}})
	held, err := s.Held()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	m.VIPHeld.Set(s.known, held)
	series := heldSeries(t, m.VIPHeld)
	for _, w := range []struct {
		vip, via string
		want     float64
	}{{ingress.String(), "vrrp", 1}, {api.String(), "vrrp", 0}, {announced.String(), "bgp", 1}} {
		if got, ok := series[[2]string{w.vip, w.via}]; !ok || got != w.want {
			t.Errorf("vip_held{vip=%q,via=%q} = %v (present: %v), want %v", w.vip, w.via, got, ok, w.want)
		}
	}
	if len(series) != len(s.known) {
		t.Errorf("%d vip_held series for %d VIPs", len(series), len(s.known))
	}

	known := maps.Clone(s.known)
	delete(known, api)
	m.VIPHeld.Set(known, held)
	if series := heldSeries(t, m.VIPHeld); len(series) != len(known) {
		t.Errorf("the API VIP gone: %d vip_held series for %d VIPs", len(series), len(known))
	}
}

// TestVIPHeldSeriesFollowPublications: each publication gives vip_held
// the render's VIPs and the held ones: a render that brings a VIP while
// the node holds the same ones gives it its series, and a VIP taken sets
// its series to 1.
func TestVIPHeldSeriesFollowPublications(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "bgp-two-racks.yaml")
	ingress := netip.MustParseAddr(c.Spec.Ingress[0].VIPs[0])
	api := netip.MustParseAddr(c.Spec.API.VIPs[0])
	added := netip.MustParseAddr("203.0.113.224")
	var addrs atomic.Pointer[[]netip.Addr]
	addrs.Store(&[]netip.Addr{ingress})
	s := newPublisher(nodePatchServer(t, func(string) bool { return true }), time.Hour, func() ([]netip.Addr, error) { return *addrs.Load(), nil })
	m := cluster.Compile(c)
	publish := func(what string) {
		t.Helper()
		if err := s.publish(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	held := func(a netip.Addr, via string) float64 { return heldSeries(t, s.m.VIPHeld)[[2]string{a.String(), via}] }

	s.rememberVIPs(m, cluster.State{})
	publish("first publication")
	before := len(heldSeries(t, s.m.VIPHeld))
	if held(ingress, "vrrp") != 1 || held(api, "vrrp") != 0 {
		t.Fatalf("vip_held: ingress %v, API %v; want 1, 0", held(ingress, "vrrp"), held(api, "vrrp"))
	}
	s.rememberVIPs(m, cluster.State{ServiceVIPs: map[string][]netip.Addr{"racks": {added}}})
	publish("after a render with a Service VIP")
	if n := len(heldSeries(t, s.m.VIPHeld)); n != before+1 {
		t.Errorf("%d vip_held series after a render added a VIP, want %d", n, before+1)
	}
	addrs.Store(&[]netip.Addr{ingress, api})
	publish("after taking the API VIP")
	if held(api, "vrrp") != 1 {
		t.Errorf("vip_held of the API VIP = %v after taking it, want 1", held(api, "vrrp"))
	}
}

// TestPublishOutlivesAStuckRequest: the first PATCH of the Node never
// gets an answer (a connection whose far end died, an apiserver waiting
// for etcd); the publication is given up after StepTimeout and retried,
// and the VIPs the node holds reach its Node.
func TestPublishOutlivesAStuckRequest(t *testing.T) {
	t.Parallel()
	var patches atomic.Int32
	published := make(chan string, 4)
	client := nodePatchServer(t, func(body string) bool {
		if patches.Add(1) == 1 {
			return false // never answered: the client gives up
		}
		published <- body
		return true
	})
	c := fixture.Example(t, "compact-ipv4.yaml")
	api := netip.MustParseAddr(c.Spec.API.VIPs[0])
	s := startPublishing(t, c, client, time.Hour, func() ([]netip.Addr, error) { return []netip.Addr{api}, nil })
	select {
	case body := <-published:
		if !strings.Contains(body, api.String()) {
			t.Errorf("published %s, want the API VIP %s", body, api)
		}
	case <-time.After(time.Minute):
		t.Fatalf("nothing published a minute after the first request got stuck (%d PATCHes)", patches.Load())
	}
	if n := testutil.ToFloat64(s.m.Failures.WithLabelValues("publish")); n < 1 {
		t.Errorf("failures_total{reason=publish} = %v, want the stuck request counted", n)
	}
}

// TestPublishRewritesAfterAnUnansweredPatch: the node takes a second VIP
// and gives it back while the PATCH that published it goes unanswered;
// the apiserver applied it all the same. The node must publish again what
// it holds, though that equals what it had published before the PATCH:
// the Node would say it holds the VIP for good.
func TestPublishRewritesAfterAnUnansweredPatch(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "compact-ipv4.yaml")
	api := netip.MustParseAddr(c.Spec.API.VIPs[0])
	ingress := netip.MustParseAddr(c.Spec.Ingress[0].VIPs[0])
	var addrs atomic.Pointer[[]netip.Addr]
	addrs.Store(&[]netip.Addr{api})
	var patches atomic.Int32
	var onNode atomic.Pointer[string]
	client := nodePatchServer(t, func(body string) bool {
		onNode.Store(&body) // applied, answered or not
		if patches.Add(1) == 2 {
			// The VIP leaves again before the client gives up.
			addrs.Store(&[]netip.Addr{api})
			return false
		}
		return true
	})
	s := startPublishing(t, c, client, time.Hour, func() ([]netip.Addr, error) { return *addrs.Load(), nil })
	waitFor := func(what string, cond func() bool) { t.Helper(); waitForNode(t, what, &patches, &onNode, cond) }
	waitFor("the API VIP published", func() bool { return patches.Load() >= 1 })
	addrs.Store(&[]netip.Addr{api, ingress})
	s.publishSoon()
	waitFor("the PATCH with the ingress VIP given up", func() bool {
		return testutil.ToFloat64(s.m.Failures.WithLabelValues("publish")) >= 1
	})
	waitFor("the Node saying the API VIP alone again", func() bool {
		p := onNode.Load()
		return patches.Load() >= 3 && p != nil && strings.Contains(*p, api.String()) && !strings.Contains(*p, ingress.String())
	})
}

// startPublishing runs the publication loop of master-0 of c against
// client until the test ends (newPublisher).
func startPublishing(t *testing.T, c *v1alpha1.ClusterVIPs, client kubernetes.Interface, resync time.Duration, addrs func() ([]netip.Addr, error)) *Sidecar {
	s := newPublisher(client, resync, addrs)
	s.rememberVIPs(cluster.Compile(c), cluster.State{})
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go s.publishLoop(ctx)
	return s
}

// newPublisher is the part of master-0's sidecar that publishes what it
// holds to client: its addresses read from addrs, retrying every 10 ms,
// giving a request up after 200 ms, and looking unprompted every resync.
func newPublisher(client kubernetes.Interface, resync time.Duration, addrs func() ([]netip.Addr, error)) *Sidecar {
	return &Sidecar{
		o: Options{
			Client: client, OnceOptions: runtimecfg.OnceOptions{NodeName: "master-0"},
			Addresses: addrs, HeldInterval: 10 * time.Millisecond, HeldResync: resync, StepTimeout: 200 * time.Millisecond,
		},
		since:       map[netip.Addr]time.Time{},
		m:           NewMetrics(nil),
		log:         slog.New(slog.DiscardHandler),
		publishKick: make(chan struct{}, 1),
	}
}

// TestPublishRepairsAStaleNode: a PATCH given up on was applied after a
// later one (an apiserver waiting for etcd), so the Node names a VIP the
// node no longer holds, while the node's record says it published the
// truth. The unprompted look writes the publication again.
func TestPublishRepairsAStaleNode(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "compact-ipv4.yaml")
	api := netip.MustParseAddr(c.Spec.API.VIPs[0])
	ingress := netip.MustParseAddr(c.Spec.Ingress[0].VIPs[0])
	var patches atomic.Int32
	var onNode atomic.Pointer[string]
	client := nodePatchServer(t, func(body string) bool {
		onNode.Store(&body)
		patches.Add(1)
		return true
	})
	startPublishing(t, c, client, 100*time.Millisecond, func() ([]netip.Addr, error) { return []netip.Addr{api}, nil })
	says := func(a netip.Addr) bool { p := onNode.Load(); return p != nil && strings.Contains(*p, a.String()) }
	waitForNode(t, "the API VIP published", &patches, &onNode, func() bool { return says(api) })
	stale := fmt.Sprintf(`{"metadata":{"annotations":{"vipctl.io/vips":"[{\"address\":\"%s\"},{\"address\":\"%s\"}]"}}}`, api, ingress)
	onNode.Store(&stale)
	waitForNode(t, "the stale ingress VIP gone from the Node", &patches, &onNode, func() bool { return !says(ingress) })
	if !says(api) {
		t.Errorf("the Node says %s, want the API VIP", *onNode.Load())
	}
}

// waitForNode polls cond for up to a minute, failing with what the fake
// apiserver last took (onNode) and how many PATCHes it had.
func waitForNode(t *testing.T, what string, patches *atomic.Int32, onNode *atomic.Pointer[string], cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			var last string
			if p := onNode.Load(); p != nil {
				last = *p
			}
			t.Fatalf("%s: not within a minute (%d PATCHes, the Node says %s)", what, patches.Load(), last)
		}
	}
}

// nodePatchServer is an apiserver that takes PATCHes of Node master-0,
// hands each body to patch, and answers only when patch says so (else
// the request hangs until the client gives up).
func nodePatchServer(t *testing.T, patch func(body string) bool) kubernetes.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPatch {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !patch(string(body)) {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"master-0"}}`)
	}))
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestRepeatSpacesKickedSteps: kicked all the time, a step starts at once
// the first time and then no sooner than gap after the one before (a
// publication of thousands of VIPs is not rewritten for every address
// added); unkicked, it waits for its interval.
func TestRepeatSpacesKickedSteps(t *testing.T) {
	t.Parallel()
	const gap = 50 * time.Millisecond
	s := &Sidecar{o: Options{StepTimeout: time.Second}, m: NewMetrics(nil), log: slog.New(slog.DiscardHandler)}
	kick := make(chan struct{}, 1)
	// Each step reports when it began and when it returned.
	type span struct{ begin, end time.Time }
	steps := make(chan span, 10)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.repeat(ctx, time.Hour, time.Hour, gap, kick, func(context.Context) error {
		sp := span{begin: time.Now()}
		sp.end = time.Now()
		select {
		case steps <- sp:
		default:
		}
		return nil
	}, "test", "test")
	go func() {
		for ctx.Err() == nil {
			select {
			case kick <- struct{}{}:
			default:
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// repeat reads its clock for step n after step n-1 returned, and
	// starts step n+1 no sooner than gap after that reading. So step
	// n+1 begins at least gap after step n-1 returned, however late a
	// loaded machine runs either goroutine; unspaced, the steps would
	// follow the kicker's millisecond.
	prev, last := <-steps, <-steps
	for range 5 {
		next := <-steps
		if d := next.begin.Sub(prev.end); d < gap {
			t.Errorf("a kicked step began %s after the step two before it returned, want at least %s", d, gap)
		}
		prev, last = last, next
	}
}

// TestHeldChange: the log line of a publication names what changed, at
// most heldLogged addresses each way, and counts the rest.
func TestHeldChange(t *testing.T) {
	t.Parallel()
	held := func(from, n int) v1alpha1.HeldVIPs {
		var out v1alpha1.HeldVIPs
		for i := from; i < from+n; i++ {
			out = append(out, v1alpha1.HeldVIP{Address: fmt.Sprintf("198.51.100.%d", i)})
		}
		return out
	}
	added, removed := heldChange(held(1, 3), held(2, 3))
	if fmt.Sprint(added) != "[198.51.100.4]" || fmt.Sprint(removed) != "[198.51.100.1]" {
		t.Errorf("1-3 → 2-4: added %v, removed %v; want [198.51.100.4] and [198.51.100.1]", added, removed)
	}
	added, removed = heldChange(nil, held(1, 25))
	if len(added) != heldLogged+1 || added[heldLogged] != "and 15 more" || len(removed) != 0 {
		t.Errorf("none → 25: added %v, removed %v; want %d addresses and \"and 15 more\", none removed", added, removed, heldLogged)
	}
}
