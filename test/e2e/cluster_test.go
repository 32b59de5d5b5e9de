package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/internal/netlab"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// labNode is one "node": a namespace running the real keepalived (and
// haproxy on control-plane nodes) with the files runtimecfg writes.
type labNode struct {
	name       string
	addr       string
	host       *netlab.Host
	target     runtimecfg.Target
	keepalived *netlab.Proc
	haproxy    *netlab.Proc
	apiserver  *standIn
	routers    map[string]*standIn
	handover   render.Handover
	// node is what the sidecar would keep in line; the lab calls its
	// Reconcile where the sidecar would sync.
	node      *runtimecfg.Node
	stopLocal func() // when a real sidecar takes over
}

// labCluster is a small cluster in a network-namespace lab.
type labCluster struct {
	t      testing.TB
	lab    *netlab.Lab
	cfg    *v1alpha1.ClusterVIPs
	nodes  []*labNode
	byName map[string]*labNode
	client *netlab.Host
	state  cluster.State
}

type nodeSpec struct {
	name         string
	addr         string // CIDR on the machine network
	addr6        string // optional IPv6 CIDR
	controlPlane bool
	labels       map[string]string
}

// startCluster builds the lab, renders every node's files through
// runtimecfg (the sidecar's own code path) and starts the daemons.
func startCluster(t testing.TB, clusterYAML string, specs []nodeSpec) *labCluster {
	t.Helper()
	cfg, err := v1alpha1.Parse([]byte(clusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	lc := &labCluster{t: t, lab: netlab.New(t), cfg: cfg, byName: map[string]*labNode{}}
	lc.client = lc.lab.AddHost("client", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	// Scripts run as keepalived_script, who must be able to reach them:
	// one world-readable base directory (t.TempDir is private).
	base, err := os.MkdirTemp("", "vipctl-lab-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		addrs := []string{s.addr}
		if s.addr6 != "" {
			addrs = append(addrs, s.addr6)
		}
		h := lc.lab.AddHost(s.name, netlab.HostOpts{Iface: "br-ex", Addrs: addrs})
		root := filepath.Join(base, s.name)
		n := &labNode{name: s.name, addr: strings.Split(s.addr, "/")[0], host: h, routers: map[string]*standIn{},
			target: runtimecfg.Target{Root: root, Netns: h.NS}}
		lc.nodes = append(lc.nodes, n)
		lc.byName[s.name] = n
		node := cluster.Node{Name: s.name, Labels: s.labels, ControlPlane: s.controlPlane, Interface: "br-ex"}
		node.Addresses = append(node.Addresses, mustAddr(t, n.addr))
		if s.addr6 != "" {
			node.Addresses = append(node.Addresses, mustAddr(t, strings.Split(s.addr6, "/")[0]))
		}
		lc.state.Nodes = append(lc.state.Nodes, node)
	}
	for _, n := range lc.nodes {
		for _, d := range []string{render.RunDir, render.HaproxyRunDir} {
			if err := os.MkdirAll(filepath.Join(n.target.Root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := runtimecfg.InitRunFiles(n.target, cfg); err != nil {
			t.Fatal(err)
		}
		lc.keepLocal(n)
		lc.apply(n)
		if lc.isControlPlane(n.name) {
			n.apiserver = startAPIServerStandIn(t, n)
			n.haproxy = n.host.Start("haproxy", manifests.HaproxyCommand(n.target.Root)...)
		}
		n.startKeepalived()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range lc.nodes {
				t.Logf("--- %s keepalived log:\n%s", n.name, n.keepalived.LogTail(25))
				if n.haproxy != nil {
					t.Logf("--- %s haproxy log:\n%s", n.name, n.haproxy.LogTail(15))
				}
				for _, args := range [][]string{{"nft", "list", "ruleset"}, {"ip", "route", "show", "table", "local", "proto", "118"}, {"ip", "-6", "route", "show", "table", "local", "proto", "118"}, {"ip", "neigh"}, {"ip", "-6", "neigh"}} {
					out, err := n.host.Exec(args...)
					t.Logf("--- %s %s: %v\n%s", n.name, strings.Join(args, " "), err, out)
				}
			}
		}
	})
	return lc
}

// startKeepalived starts keepalived on the node with its rendered files,
// as the keepalived container does.
func (n *labNode) startKeepalived() {
	n.keepalived = n.host.Start("keepalived", manifests.KeepalivedCommand(n.target.Root)...)
}

// keepLocal runs what the sidecar runs to keep the VIPs a node holds (and
// held lately) local, so that connections open when a VIP leaves are still
// answered.
func (lc *labCluster) keepLocal(n *labNode) {
	local := runtimecfg.NewLocalVIPs(n.target, runtimecfg.HandoverGrace)
	n.node = runtimecfg.NewNode(n.target, n.name, local)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		local.Run(ctx, time.Second, func(err error) { lc.t.Errorf("%s: keeping VIPs local: %v", n.name, err) })
	}()
	var once sync.Once
	n.stopLocal = func() { once.Do(func() { cancel(); <-done }) }
	lc.t.Cleanup(n.stopLocal)
}

func (lc *labCluster) isControlPlane(name string) bool {
	for _, n := range lc.state.Nodes {
		if n.Name == name {
			return n.ControlPlane
		}
	}
	return false
}

// apply brings the node in line with the lab's config and state through
// the sidecar's own Reconcile (render, judge, atomic write, reload, API
// redirect, handover table, local VIPs).
func (lc *labCluster) apply(n *labNode) runtimecfg.Result {
	lc.t.Helper()
	out, err := n.node.Reconcile(context.Background(), runtimecfg.Input{Config: lc.cfg, State: lc.state})
	if err != nil {
		lc.t.Fatal(err)
	}
	if out.HandoverErr != nil {
		lc.t.Fatal(out.HandoverErr)
	}
	n.handover = out.Handover
	return out.Result
}

// drain starts a planned handover on n, as the sidecar does when the drain
// file changes.
func (lc *labCluster) drain(n *labNode) {
	lc.t.Helper()
	lc.t.Logf("draining %s at %s", n.name, time.Now().Format("15:04:05.000"))
	if err := runtimecfg.Drain(n.target, n.handover); err != nil {
		lc.t.Fatal(err)
	}
	n.node.Local.Kick()
}

// holders lists the nodes that have vip on their interface right now.
func (lc *labCluster) holders(vip string) []string {
	var out []string
	for _, n := range lc.nodes {
		got, err := n.host.Exec("ip", "-o", "addr", "show", "dev", "br-ex")
		if err == nil && strings.Contains(string(got), " "+vip+"/") {
			out = append(out, n.name)
		}
	}
	return out
}

// waitHolder waits until exactly one node holds vip and it satisfies ok.
func (lc *labCluster) waitHolder(vip string, timeout time.Duration, ok func(string) bool) string {
	lc.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []string
	for time.Now().Before(deadline) {
		last = lc.holders(vip)
		if len(last) == 1 && ok(last[0]) {
			return last[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	lc.t.Fatalf("%s: holders %v after %s", vip, last, timeout)
	return ""
}

// waitNewHolder waits until a node other than old holds vip. old may
// still have it too: a node cut off from the network, or whose keepalived
// was killed, keeps the address (lab-notes pitfall 2).
func (lc *labCluster) waitNewHolder(vip, old string, timeout time.Duration) string {
	lc.t.Helper()
	var next string
	waitFor(lc.t, timeout, vip+" held by a node other than "+old, func() bool {
		for _, h := range lc.holders(vip) {
			if h != old {
				next = h
				return true
			}
		}
		return false
	})
	return next
}

// settled waits until vip has one holder that keeps it for longer than the
// profile's preempt delay: at start-up the first node to time out takes the
// VIP and the preferred one preempts it a little later.
func (lc *labCluster) settled(vip string) string {
	lc.t.Helper()
	return lc.settledAll(vip)[vip]
}

// settledAll is settled for several VIPs at once: all of them must keep
// their holders through one quiet period.
func (lc *labCluster) settledAll(vips ...string) map[string]string {
	lc.t.Helper()
	quiet := 3 * time.Second
	if lc.cfg.Spec.VRRP.Profile == v1alpha1.ProfileDefault {
		quiet = 12 * time.Second
	}
	deadline := time.Now().Add(quiet + 30*time.Second)
	holders, since := map[string]string{}, time.Now()
	for time.Now().Before(deadline) {
		cur, complete := map[string]string{}, true
		for _, vip := range vips {
			if h := lc.holders(vip); len(h) == 1 {
				cur[vip] = h[0]
			} else {
				complete = false
			}
		}
		if !maps.Equal(cur, holders) {
			holders, since = cur, time.Now()
		}
		if complete && time.Since(since) > quiet {
			return holders
		}
		time.Sleep(100 * time.Millisecond)
	}
	lc.t.Fatalf("VIPs never settled on one holder each (last %v)", holders)
	return nil
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// standIn is an in-process server listening inside a node's namespace.
type standIn struct {
	srv   *httptest.Server
	ready atomic.Bool
	name  string
}

func (s *standIn) Close() { s.srv.Close() }

// startAPIServerStandIn serves HTTPS on the node's address:6443 like a
// kube-apiserver: /readyz for haproxy's checks, / answers with the node
// name so a client can tell which backend it reached.
func startAPIServerStandIn(t testing.TB, n *labNode) *standIn {
	t.Helper()
	s := &standIn{name: n.name}
	s.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, n.name) })
	s.srv = httptest.NewUnstartedServer(mux)
	var l net.Listener
	if err := n.host.Do(func() (err error) { l, err = net.Listen("tcp", net.JoinHostPort(n.addr, "6443")); return err }); err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = l
	s.srv.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// startRouterStandIn is a router pod of one IngressController on node n:
// health on 0.0.0.0:healthPort (what keepalived's script asks) and traffic
// on vip:80.
func startRouterStandIn(t testing.TB, n *labNode, controller string, healthPort int32, vip string) *standIn {
	t.Helper()
	s := &standIn{name: n.name}
	s.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintf(w, "%s/%s", controller, n.name) })
	s.srv = httptest.NewUnstartedServer(mux)
	var health, traffic net.Listener
	if err := n.host.Do(func() (err error) {
		if health, err = net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", healthPort)); err != nil {
			return err
		}
		traffic, err = net.Listen("tcp", net.JoinHostPort(vip, "80"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = health
	s.srv.Start()
	extra := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = extra.Serve(traffic) }()
	t.Cleanup(func() { _ = extra.Close(); s.Close() })
	n.routers[controller] = s
	return s
}

// startEcho serves HTTP on addr inside node n, answering with the node's
// name: the workload behind a service VIP.
func startEcho(t testing.TB, n *labNode, addr string) {
	t.Helper()
	var l net.Listener
	if err := n.host.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, n.name) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// poller is a client of a VIP: from the client namespace it opens a new
// connection to url every interval (250 ms timeout; poll waits for each
// answer, probe does not) and remembers what failed, who answered when,
// and the longest run of failures.
type poller struct {
	mu           sync.Mutex
	ok, fail     int
	lastBody     string
	seen         []sighting
	failedStarts []time.Time
	errs         []string
	failingSince time.Time
	longest      time.Duration
	slowest      time.Duration // the longest a good answer took
	client       *netlab.Host
	retrans0     int // the client's TCP retransmissions when polling began
	stop         chan struct{}
	done         chan struct{}
}

// sighting is one good answer: when, and the body (the node's name for the
// lab's stand-ins).
type sighting struct {
	at   time.Time
	node string
}

func (lc *labCluster) poll(url string, interval time.Duration) *poller {
	return lc.startPolling(url, interval, false)
}

// probe is poll without waiting: every interval starts a request of its
// own, however many are still waiting for an answer, so that the first
// good answer after an outage comes within an interval of the network
// healing rather than up to a timeout later (a benchmark's resolution).
func (lc *labCluster) probe(url string, interval time.Duration) *poller {
	return lc.startPolling(url, interval, true)
}

func (lc *labCluster) startPolling(url string, interval time.Duration, concurrent bool) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{}), client: lc.client, retrans0: tcpRetrans(lc.client)}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // stand-in servers with throwaway certificates
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := lc.client.DialContext(ctx, network, addr)
			if tr, ok := ctx.Value(requestTraceKey{}).(*requestTrace); ok && err == nil {
				tr.set(conn.LocalAddr().String(), "connected")
			}
			return conn, err
		},
	}
	c := &http.Client{Transport: tr, Timeout: 250 * time.Millisecond}
	request := func() {
		started := time.Now()
		var tr requestTrace
		body, err := get(tr.context(context.Background()), c, url)
		if err != nil {
			err = fmt.Errorf("started %s, %s: %w", started.Format("15:04:05.000"), tr.String(), err)
		}
		p.record(started, time.Now(), body, err)
	}
	go func() {
		var inFlight sync.WaitGroup
		defer close(p.done)
		defer inFlight.Wait()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			if concurrent {
				inFlight.Go(request)
			} else {
				request()
			}
		}
	}()
	return p
}

// persistent keeps one connection open across requests, to show what
// happens to a connection accepted before a handover.
type persistent struct {
	c   *http.Client
	url string
}

func (lc *labCluster) persistent(url string) *persistent {
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // stand-in servers with throwaway certificates
		DialContext:     lc.client.DialContext,
		MaxConnsPerHost: 1,
		IdleConnTimeout: time.Minute,
	}
	return &persistent{c: &http.Client{Transport: tr, Timeout: 2 * time.Second}, url: url}
}

// get makes one request and tells whether it went over an earlier
// connection.
func (p *persistent) get() (reused bool, err error) {
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return false, err
	}
	resp, err := p.c.Do(req)
	if err != nil {
		return reused, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(io.Discard, resp.Body)
	return reused, err
}

func (p *persistent) Close() { p.c.CloseIdleConnections() }

// openKept opens a keep-alive connection to url and makes a first request
// over it.
func (lc *labCluster) openKept(t testing.TB, url string) *persistent {
	t.Helper()
	p := lc.persistent(url)
	if _, err := p.get(); err != nil {
		t.Fatalf("opening a keep-alive connection to %s: %v", url, err)
	}
	return p
}

// wantAnsweredOver makes one more request, closes the connection, and
// fails t unless the request was answered over the connection opened
// before (what names that connection's story).
func (p *persistent) wantAnsweredOver(t testing.TB, what string) {
	t.Helper()
	reused, err := p.get()
	p.Close()
	if err != nil || !reused {
		t.Errorf("%s: reused %v, %v; want answered over the same connection", what, reused, err)
	}
}

// requestTrace is how far one request got, for the report of a failed
// one: the local port names the connection in haproxy's log, the stage
// tells a lost SYN from a stalled handshake or answer.
type requestTrace struct {
	mu    sync.Mutex
	local string
	stage string
}

func (r *requestTrace) set(local, stage string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if local != "" {
		r.local = local
	}
	r.stage = stage
}

type requestTraceKey struct{}

func (r *requestTrace) context(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, requestTraceKey{}, r)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectStart:         func(_, _ string) { r.set("", "connecting") },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { r.set("", "handshake done") },
		WroteRequest:         func(httptrace.WroteRequestInfo) { r.set("", "request written") },
		GotFirstResponseByte: func() { r.set("", "answer started") },
	})
}

func (r *requestTrace) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	stage := r.stage
	if stage == "" {
		stage = "not dialed"
	}
	if r.local == "" {
		return stage
	}
	return stage + " from " + r.local
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), err
}

func (p *poller) record(started, now time.Time, body string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.fail++
		p.failedStarts = append(p.failedStarts, started)
		p.errs = append(p.errs, err.Error())
		if p.failingSince.IsZero() {
			p.failingSince = now
		}
		return
	}
	p.ok++
	p.slowest = max(p.slowest, now.Sub(started))
	p.lastBody = body
	p.seen = append(p.seen, sighting{at: now, node: body})
	if !p.failingSince.IsZero() {
		p.longest = max(p.longest, now.Sub(p.failingSince))
		p.failingSince = time.Time{}
	}
}

// wantNoFailures waits for 50 more good answers (the new holder serves),
// stops polling, and fails t for every request that failed since it
// started, with how far each got.
func (p *poller) wantNoFailures(t testing.TB, what string) {
	t.Helper()
	ok0, _ := p.counts()
	waitFor(t, 10*time.Second, "answers after "+what, func() bool { ok, _ := p.counts(); return ok > ok0+50 })
	ok, fail := p.Stop()
	p.mu.Lock()
	slowest := p.slowest
	p.mu.Unlock()
	// Retransmissions tell a lost segment (a hole in the handover) from a
	// slow machine; they are reported, not judged: a busy CI machine can
	// cause them too.
	t.Logf("%s: %d of %d requests failed, the slowest good answer took %s, the client retransmitted %d segments",
		what, fail, ok+fail, slowest.Round(time.Millisecond), tcpRetrans(p.client)-p.retrans0)
	if fail > 0 {
		t.Errorf("%s: %d requests failed; want none:\n%s", what, fail, strings.Join(p.errs, "\n"))
	}
}

// tcpRetrans is how many TCP segments the host has retransmitted
// (RetransSegs of /proc/net/snmp, read inside its namespace); -1 if that
// cannot be read.
func tcpRetrans(h *netlab.Host) int {
	out, err := h.Exec("cat", "/proc/net/snmp")
	if err != nil {
		return -1
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		if i := slices.Index(names, "RetransSegs"); i > 0 && i < len(fields) {
			n, err := strconv.Atoi(fields[i])
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// Stop ends the polling and returns the final counts.
func (p *poller) Stop() (ok, fail int) {
	close(p.stop)
	<-p.done
	return p.counts()
}

func (p *poller) counts() (ok, fail int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.fail
}

// longestGap is the longest run of failures that ended in a good answer.
func (p *poller) longestGap() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.longest
}

// firstFrom waits for the first answer after since from a node matching ok.
func (p *poller) firstFrom(t testing.TB, ok func(string) bool, since time.Time, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	waitFor(t, timeout, "an answer from a new holder", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		i := slices.IndexFunc(p.seen, func(s sighting) bool { return s.at.After(since) && ok(s.node) })
		if i >= 0 {
			at = p.seen[i].at
		}
		return i >= 0
	})
	return at
}

// logMark is where each node's keepalived log ended at some moment.
type logMark map[string]int

// mark notes where every node's keepalived log ends now.
func (lc *labCluster) mark() logMark {
	m := logMark{}
	for _, n := range lc.nodes {
		data, _ := os.ReadFile(n.keepalived.Log)
		m[n.name] = len(data)
	}
	return m
}

// keepalived logs every VRRP state change of an instance, also the ones a
// reload causes, as "(name) Entering MASTER STATE".
var transitionRE = regexp.MustCompile(`\((\w+)\) Entering (MASTER|BACKUP|FAULT) STATE`)

// transitions lists, as "node: log line", the VRRP state changes keepalived
// logged on any node since m, of the named instances (of all when none is
// named).
func (lc *labCluster) transitions(since logMark, instances ...string) []string {
	var out []string
	for _, n := range lc.nodes {
		data, _ := os.ReadFile(n.keepalived.Log)
		for _, line := range strings.Split(string(data[min(since[n.name], len(data)):]), "\n") {
			m := transitionRE.FindStringSubmatch(line)
			if m != nil && (len(instances) == 0 || slices.Contains(instances, m[1])) {
				out = append(out, n.name+": "+strings.TrimSpace(line))
			}
		}
	}
	return out
}

// crash simulates a node's keepalived dying hard (lab-notes pitfall 1):
// SIGSTOP then SIGKILL both the parent and its VRRP child, so nothing
// hands over gracefully. The VIP stays on the interface (pitfall 2).
func (n *labNode) crashKeepalived(t testing.TB) {
	t.Helper()
	vrrp := readPID(t, filepath.Join(n.target.Root, render.VRRPPIDFile))
	parent := readPID(t, filepath.Join(n.target.Root, render.KeepalivedPIDFile))
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, pid := range []int{parent, vrrp} {
			_ = syscall.Kill(pid, sig)
		}
	}
}

func readPID(t testing.TB, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "%d", &pid); err != nil || pid <= 1 {
		t.Fatalf("%s: bad pid %q", path, data)
	}
	return pid
}
