package sidecar

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
)

// proxyAnswer serves what kube-proxy's health check for a Local Service
// serves (pkg/proxy/healthcheck/service_health.go, Kubernetes v1.36): the
// count of local ready endpoints, 503 when none.
func proxyAnswer(count *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		n := count.Load()
		w.Header().Set("Content-Type", "application/json")
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = fmt.Fprintf(w, `{"service": {"namespace": "shop", "name": "web"}, "localEndpoints": %d, "serviceProxyHealthy": true}`, n)
	}
}

// TestProxyGateJudgesTheProxysAnswer: a Service is pending only while the
// proxy answers that it counts no local endpoint; a proxy that counts
// one, does not answer (nothing listens, too slow) or answers something
// else has no say.
func TestProxyGateJudgesTheProxysAnswer(t *testing.T) {
	t.Parallel()
	var none, one atomic.Int32
	one.Store(1)
	counts0 := httptest.NewServer(proxyAnswer(&none))
	defer counts0.Close()
	counts1 := httptest.NewServer(proxyAnswer(&one))
	defer counts1.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer garbage.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * proxyProbeTimeout):
		case <-r.Context().Done():
		}
		proxyAnswer(&none)(w, r)
	}))
	defer slow.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/healthz"
	_ = l.Close()

	g := newProxyGate(host.Target{}, func() {})
	got := g.Check(context.Background(), map[string]proxyTarget{
		"shop/counts-none":  {url: counts0.URL + "/healthz"},
		"shop/counts-one":   {url: counts1.URL + "/healthz"},
		"shop/not-json":     {url: garbage.URL + "/healthz"},
		"shop/too-slow":     {url: slow.URL + "/healthz"},
		"shop/nobody-there": {url: refused},
	})
	if len(got) != 1 || !got["shop/counts-none"] {
		t.Errorf("pending %v, want only shop/counts-none", got)
	}
}

// TestProxyGateFollowsTheProxy: a pending Service is asked about again
// until its proxy delivers, which calls changed (the sidecar syncs); a
// Service no longer listed is forgotten, and asked about afresh when it
// comes back.
func TestProxyGateFollowsTheProxy(t *testing.T) {
	t.Parallel()
	var count atomic.Int32
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		proxyAnswer(&count)(w, r)
	}))
	defer srv.Close()
	changed := make(chan struct{}, 1)
	g := newProxyGate(host.Target{}, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.loop(ctx)
	targets := map[string]proxyTarget{"shop/web": {url: srv.URL + "/healthz"}}
	if got := g.Check(ctx, targets); !got["shop/web"] {
		t.Fatalf("pending %v while the proxy counts none", got)
	}
	before := asked.Load()
	if got := g.Check(ctx, targets); !got["shop/web"] || asked.Load() != before {
		t.Errorf("a second Check of the same target: pending %v, asked again %t; want pending from what the loop knows", got, asked.Load() != before)
	}
	count.Store(1)
	select {
	case <-changed:
	case <-time.After(10 * proxyPendingInterval):
		t.Fatal("the proxy delivers now, but changed was not called")
	}
	if got := g.Pending(); len(got) != 0 {
		t.Errorf("pending %v after the proxy delivers", got)
	}
	count.Store(0)
	g.Check(ctx, nil)
	if got := g.Check(ctx, targets); !got["shop/web"] {
		t.Errorf("a target listed again is asked afresh: pending %v, want shop/web (its proxy counts none again)", got)
	}
}

// TestProxyTargets: only the Local Services with a ready endpoint on this
// node and a health check node port, asked at the node's IPv4 address
// when it has one.
func TestProxyTargets(t *testing.T) {
	t.Parallel()
	nodes := []cluster.Node{
		{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::21"), netip.MustParseAddr("198.51.100.21")}},
		{Name: "worker-1", Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::22")}},
	}
	local := []cluster.LocalService{
		{Name: "shop/here", Nodes: []string{"worker-0", "worker-1"}, HealthCheckNodePort: 31000},
		{Name: "shop/elsewhere", Nodes: []string{"worker-1"}, HealthCheckNodePort: 31001},
		{Name: "shop/draining-here", Nodes: []string{"worker-1"}, Draining: []string{"worker-0"}, HealthCheckNodePort: 31002},
		{Name: "shop/no-port", Nodes: []string{"worker-0"}},
	}
	got := proxyTargets(local, nodes, "worker-0")
	want := map[string]proxyTarget{"shop/here": {url: "http://198.51.100.21:31000/healthz"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("worker-0: %v, want %v", got, want)
	}
	got = proxyTargets(local, nodes, "worker-1")
	if len(got) != 3 || got["shop/elsewhere"].url != "http://[2001:db8::22]:31001/healthz" {
		t.Errorf("worker-1 (IPv6 only): %v", got)
	}
	if got := proxyTargets(local, nodes, "worker-9"); len(got) != 0 {
		t.Errorf("a node not in the list: %v", got)
	}
}
