package sidecar

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
)

// proxyGate asks this node's service proxy whether it delivers a Local
// Service's traffic to the node's own endpoints yet, on the Service's
// health check node port, the way a cloud load balancer asks it:
// kube-proxy (and OVN-Kubernetes) answer with the number of local ready
// endpoints they know of. The EndpointSlices may say an endpoint is
// ready here while the proxy, whose watch lags or went stale, does not
// know it: a node that took the VIP then would drop the Service's
// traffic. While the proxy counts none, the node is a Local Service's
// member at priority 1 (runtimecfg.Input.ProxyPending): it keeps what it
// holds and takes nothing from a peer, and it takes the VIP over once the
// proxy delivers (make-before-break, as a pod moving in).
//
// A proxy that does not answer (none listens: no kube-proxy, a port not
// served yet; a timeout) has no say, and the EndpointSlices decide alone,
// as before: the gate only ever waits on a proxy that answers "none".
type proxyGate struct {
	target host.Target
	// changed is called when a pending Service's proxy delivers, or one
	// stops: the caller syncs again.
	changed func()
	client  *http.Client

	mu sync.Mutex
	// asked are the Services of the last Check, by namespace/name.
	asked map[string]proxyTarget
	// pending are those whose proxy counts no local endpoint.
	pending map[string]bool
}

// proxyTarget is where to ask about one Local Service.
type proxyTarget struct {
	url string
}

// proxyProbeTimeout bounds one question: a proxy answers at once or has
// no say.
const proxyProbeTimeout = 300 * time.Millisecond

// proxyPendingInterval paces the questions about pending Services.
const proxyPendingInterval = 250 * time.Millisecond

func newProxyGate(t host.Target, changed func()) *proxyGate {
	g := &proxyGate{target: t, changed: changed, asked: map[string]proxyTarget{}, pending: map[string]bool{}}
	g.client = &http.Client{Timeout: proxyProbeTimeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		// In the node's network namespace, where its proxy listens (the
		// same as the process's in the keepalived pod).
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := t.InNetns(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
	return g
}

// proxyTargets are the Local Services this node runs a ready endpoint of,
// each with where its proxy answers: the node's first address (IPv4
// first: the proxy serves its health checks on the node's primary
// addresses) at the Service's health check node port.
func proxyTargets(local []cluster.LocalService, nodes []cluster.Node, self string) map[string]proxyTarget {
	var addr netip.Addr
	for _, n := range nodes {
		if n.Name != self {
			continue
		}
		for _, a := range n.Addresses {
			if !addr.IsValid() || (a.Is4() && !addr.Is4()) {
				addr = a
			}
		}
	}
	out := map[string]proxyTarget{}
	if !addr.IsValid() {
		return out
	}
	for _, ls := range local {
		if ls.HealthCheckNodePort == 0 || !slices.Contains(ls.Nodes, self) {
			continue
		}
		out[ls.Name] = proxyTarget{url: "http://" + net.JoinHostPort(addr.String(), strconv.Itoa(int(ls.HealthCheckNodePort))) + "/healthz"}
	}
	return out
}

// Check asks about the targets it has not asked about yet (all at once,
// each bounded by proxyProbeTimeout), forgets those no longer listed, and
// returns the Services whose proxy counts no local endpoint.
func (g *proxyGate) Check(ctx context.Context, targets map[string]proxyTarget) map[string]bool {
	g.mu.Lock()
	var fresh []string
	for name, tg := range targets {
		if old, ok := g.asked[name]; !ok || old != tg {
			fresh = append(fresh, name)
		}
	}
	g.asked = targets
	for name := range g.pending {
		if _, ok := targets[name]; !ok {
			delete(g.pending, name)
		}
	}
	g.mu.Unlock()
	g.ask(ctx, fresh)
	return g.Pending()
}

// Pending is a copy of the Services whose proxy counts no local endpoint.
func (g *proxyGate) Pending() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]bool, len(g.pending))
	for k := range g.pending {
		out[k] = true
	}
	return out
}

// ask asks about names and records the answers; it tells whether a
// Service's pendingness changed.
func (g *proxyGate) ask(ctx context.Context, names []string) bool {
	if len(names) == 0 {
		return false
	}
	type answer struct {
		name    string
		pending bool
	}
	g.mu.Lock()
	urls := make(map[string]string, len(names))
	for _, n := range names {
		urls[n] = g.asked[n].url
	}
	g.mu.Unlock()
	answers := make(chan answer, len(names))
	for name, url := range urls {
		go func() { answers <- answer{name, g.countsNone(ctx, url)} }()
	}
	changed := false
	got := make([]answer, 0, len(names))
	for range names {
		got = append(got, <-answers)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, a := range got {
		if _, still := g.asked[a.name]; !still {
			continue
		}
		if g.pending[a.name] != a.pending {
			changed = true
		}
		if a.pending {
			g.pending[a.name] = true
		} else {
			delete(g.pending, a.name)
		}
	}
	return changed
}

// countsNone tells whether the proxy at url answers that it delivers to
// no local endpoint. Any other outcome (an endpoint counted, no answer,
// an answer it cannot read) leaves the EndpointSlices to decide.
func (g *proxyGate) countsNone(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		LocalEndpoints *int `json:"localEndpoints"`
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil || json.Unmarshal(data, &body) != nil || body.LocalEndpoints == nil {
		return false
	}
	return *body.LocalEndpoints == 0
}

// loop asks again about the pending Services every proxyPendingInterval
// and calls changed when one's proxy delivers.
func (g *proxyGate) loop(ctx context.Context) {
	t := time.NewTicker(proxyPendingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var names []string
		for name := range g.Pending() {
			names = append(names, name)
		}
		if g.ask(ctx, names) {
			g.changed()
		}
	}
}
