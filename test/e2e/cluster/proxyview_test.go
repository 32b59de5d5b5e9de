package cluster

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/test/clusterlab"
)

// proxyLagLimit is how long a node's kube-proxy may send a Service's
// traffic to an address that is no serving endpoint of it before the
// roll calls that a lag: kube-proxy follows the EndpointSlices within a
// second or two when its watch is alive.
const proxyLagLimit = 3 * time.Second

// proxyLags watches where each node's kube-proxy sends each of the lab's
// Services: the endpoints its nftables service chain chooses among
// (kube-proxy's nftables mode names each endpoint chain after the
// endpoint's address), against the Services' serving endpoints in the
// API. docs/lab.md has roll failures where one holder kept sending a
// quarter of its connections to nothing for 20 s, as if its kube-proxy's
// watch had gone stale; this tells, in CI's verdict lines, whether that
// is what happened.
type proxyLags struct {
	mu sync.Mutex
	// since is when each (node, family, Service, address) was first
	// seen sent traffic without being a serving endpoint.
	since map[string]time.Time
	// lags are the episodes that lasted proxyLagLimit or more.
	lags []string
	// views counts the node tables read that named a Service's
	// endpoints: a report of no lag rests on them.
	views int
	// conns is, by node, its kube-proxy's TCP connections (proxyConns)
	// when a lag of it first reached proxyLagLimit, and when: a stale
	// watch shows there as a connection that has received nothing for
	// long, and where it goes as where its answers come from.
	conns   map[string]string
	connsAt map[string]time.Time
	stop    func()
	done    chan struct{}
}

// watchProxyLags samples every second until Stop.
func watchProxyLags(ctx context.Context, c *clusterlab.Cluster) *proxyLags {
	ctx, stop := context.WithCancel(ctx)
	p := &proxyLags{since: map[string]time.Time{}, conns: map[string]string{}, connsAt: map[string]time.Time{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			p.sample(ctx, c)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return p
}

func (p *proxyLags) sample(ctx context.Context, c *clusterlab.Cluster) {
	stale, views, err := staleProxies(ctx, c)
	if err != nil {
		return
	}
	now := time.Now()
	seen := map[string]bool{}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.views += views
	for _, key := range stale {
		seen[key] = true
		if _, ok := p.since[key]; !ok {
			p.since[key] = now
		}
	}
	for key, from := range p.since {
		node, _, _ := strings.Cut(key, " ")
		if now.Sub(from) >= proxyLagLimit && p.connsAt[node].Before(from) {
			// This node's first lag of the episode: what its kube-proxy
			// is connected to now.
			for _, n := range c.Nodes {
				if n.Name == node {
					p.conns[node], p.connsAt[node] = proxyConns(n), now
				}
			}
		}
		if seen[key] {
			continue
		}
		if now.Sub(from) >= proxyLagLimit {
			p.lags = append(p.lags, fmt.Sprintf("%s from %s to %s", key, from.Format("15:04:05"), now.Format("15:04:05")))
		}
		delete(p.since, key)
	}
}

// staleProxies reads every running node's kube-proxy tables and the
// lab's EndpointSlices once: stale names each (node, Service, address) a
// node's kube-proxy sends traffic to that is no serving endpoint of the
// Service ("master-2 sent lab/vrrp-cluster traffic to 203.0.113.36");
// views counts the tables read that named endpoints.
func staleProxies(ctx context.Context, c *clusterlab.Cluster) (stale []string, views int, err error) {
	slices, err := c.Admin.DiscoveryV1().EndpointSlices(clusterlab.WorkloadNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	serving := servingAddrs(slices.Items)
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		for _, fam := range []string{"ip", "ip6"} {
			out, err := n.Host.Exec("nft", "list", "table", fam, "kube-proxy")
			if err != nil {
				continue
			}
			eps := proxyEndpoints(string(out), fam == "ip6")
			if len(eps) > 0 {
				views++
			}
			for svc, addrs := range eps {
				if !strings.HasPrefix(svc, clusterlab.WorkloadNS+"/") {
					continue // the API's own Service: not the lab's workloads
				}
				for _, a := range addrs {
					if !serving[svc][a] {
						stale = append(stale, n.Name+" sent "+svc+" traffic to "+a)
					}
				}
			}
		}
	}
	return stale, views, nil
}

// Stop ends the sampling.
func (p *proxyLags) Stop() {
	p.stop()
	<-p.done
}

// Views is how many node tables were read that named endpoints.
func (p *proxyLags) Views() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.views
}

// Report says which lags there were, ones still going included.
func (p *proxyLags) Report() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.lags)
	now := time.Now()
	for key, from := range p.since {
		if now.Sub(from) >= proxyLagLimit {
			out = append(out, fmt.Sprintf("%s from %s on", key, from.Format("15:04:05")))
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("none in %d readings of the nodes' kube-proxy tables", p.views)
	}
	slices.Sort(out)
	// The connections first: a verdict line is cut at its end.
	var conns []string
	for _, node := range slices.Sorted(maps.Keys(p.conns)) {
		conns = append(conns, fmt.Sprintf("%s's kube-proxy at %s: %s", node, p.connsAt[node].Format("15:04:05"), p.conns[node]))
	}
	return strings.Join(append(conns, out...), "; ")
}

// proxyConns sums up the node's kube-proxy's TCP connections, listeners
// left out: each one's ends and state, how long ago it last sent and
// received (ss -i, ms), what it has unacknowledged and retransmitted,
// and, from the node's conntrack, whom its answers come from (the API
// redirect turns a connection to the API VIP to the node's haproxy; one
// that bypassed it is answered by the VIP itself); then haproxy's
// connections to the apiservers (haproxyUpstreams).
func proxyConns(n *clusterlab.Node) string {
	out, err := n.Host.Exec("ss", "-tnpiOHa")
	if err != nil {
		return fmt.Sprintf("ss: %v", err)
	}
	socks := ssSockets(string(out))
	var conns []string
	for _, c := range kubeProxySockets(socks) {
		ct, err := n.Host.Exec("conntrack", "-L", "-p", "tcp", "--orig-port-src", c.port)
		answerer := "conntrack: " + strings.TrimSpace(string(ct))
		if err == nil {
			answerer = conntrackAnswerer(string(ct))
		}
		conns = append(conns, c.summary+" "+answerer)
	}
	if len(conns) == 0 {
		conns = append(conns, "no connection")
	}
	// Through the API redirect the watch rides one of haproxy's
	// connections to an apiserver: an apiserver whose connections all
	// went quiet is the one that stopped sending.
	return strings.Join(conns, ", ") + "; haproxy's to the apiservers: " + haproxyUpstreams(socks)
}

// haproxyUpstreams sums up haproxy's established connections to port
// 6443 among socks, by apiserver: how many, and the least recent
// receive among them (lastrcv, ms).
func haproxyUpstreams(socks []ssSocket) string {
	type upstream struct{ n, quietest int }
	by := map[string]*upstream{}
	for _, k := range socks {
		if k.state != "ESTAB" || k.process != "haproxy" || !strings.HasSuffix(k.peer, ":6443") {
			continue
		}
		u := by[k.peer]
		if u == nil {
			u = &upstream{}
			by[k.peer] = u
		}
		u.n++
		if m := lastrcvRE.FindStringSubmatch(k.line); m != nil {
			if ms, err := strconv.Atoi(m[1]); err == nil && ms > u.quietest {
				u.quietest = ms
			}
		}
	}
	if len(by) == 0 {
		return "none"
	}
	var out []string
	for _, peer := range slices.Sorted(maps.Keys(by)) {
		out = append(out, fmt.Sprintf("%s ×%d (quietest lastrcv:%d)", peer, by[peer].n, by[peer].quietest))
	}
	return strings.Join(out, ", ")
}

var lastrcvRE = regexp.MustCompile(`\blastrcv:([0-9]+)`)

// ssSocket is one line of `ss -tnpiOHa`: its state, ends, the first
// process named as its user, and the whole line (ss -i's fields).
type ssSocket struct{ state, local, peer, process, line string }

// ssSockets reads `ss -tnpiOHa`.
func ssSockets(ss string) []ssSocket {
	var out []ssSocket
	for _, line := range strings.Split(ss, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		k := ssSocket{state: f[0], local: f[3], peer: f[4], line: line}
		if m := ssProcessRE.FindStringSubmatch(line); m != nil {
			k.process = m[1]
		}
		out = append(out, k)
	}
	return out
}

var ssProcessRE = regexp.MustCompile(`users:\(\("([^"]+)"`)

// proxySocket is one of kube-proxy's connections: its summary and its
// local port.
type proxySocket struct{ summary, port string }

// kubeProxySockets picks kube-proxy's connections among socks,
// listeners left out: state, ends and the ssInfoRE fields of each.
func kubeProxySockets(socks []ssSocket) []proxySocket {
	var out []proxySocket
	for _, k := range socks {
		if k.state == "LISTEN" || k.process != "kube-proxy" {
			continue
		}
		c := proxySocket{summary: k.state + " " + k.local + "->" + k.peer, port: k.local[strings.LastIndex(k.local, ":")+1:]}
		for _, m := range ssInfoRE.FindAllString(k.line, -1) {
			c.summary += " " + m
		}
		out = append(out, c)
	}
	return out
}

// ssInfoRE picks the fields of `ss -i` that tell a live connection from
// a stale one.
var ssInfoRE = regexp.MustCompile(`\b(lastsnd|lastrcv|unacked|retrans):[0-9/]+`)

// conntrackAnswerer is whom `conntrack -L`'s entry of a connection says
// answers it: its reply tuple's source.
func conntrackAnswerer(listing string) string {
	for _, line := range strings.Split(listing, "\n") {
		src := conntrackSrcRE.FindAllStringSubmatch(line, -1)
		sport := conntrackSportRE.FindAllStringSubmatch(line, -1)
		if len(src) == 2 && len(sport) == 2 {
			return "answered from " + net.JoinHostPort(src[1][1], sport[1][1])
		}
	}
	return "no conntrack entry"
}

var (
	conntrackSrcRE   = regexp.MustCompile(`\bsrc=(\S+)`)
	conntrackSportRE = regexp.MustCompile(`\bsport=(\S+)`)
)

// servingAddrs are each Service's serving endpoints' addresses, by
// "namespace/name".
func servingAddrs(items []discoveryv1.EndpointSlice) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, s := range items {
		svc := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		if out[svc] == nil {
			out[svc] = map[string]bool{}
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Serving != nil && !*e.Conditions.Serving {
				continue
			}
			for _, a := range e.Addresses {
				out[svc][a] = true
			}
		}
	}
	return out
}

var (
	// serviceChainRE is the head of kube-proxy's chain for a Service
	// ("chain service-ULMVA6XW-lab/vrrp-cluster/tcp/ {").
	serviceChainRE = regexp.MustCompile(`^\s*chain service-[A-Z0-9]+-([^/\s]+/[^/\s]+)/`)
	// endpointRE is an endpoint chain named in it, as kube-proxy writes
	// it for a Service with session affinity ("goto
	// endpoint-2JNKTDBI-lab/vrrp-cluster/tcp/http__203.0.113.5/8080").
	endpointRE = regexp.MustCompile(`endpoint-[A-Z0-9]+-[^\s]*__([0-9a-fA-F:.]+)/[0-9]+`)
	// dnatRE is an element of the map it DNATs through otherwise
	// ("dnat ip to numgen random mod 2 map { 0 : 203.0.113.2 . 8080, 1
	// : ... }").
	dnatRE = regexp.MustCompile(`\b[0-9]+ : ([0-9a-fA-F:.]+) \. [0-9]+`)
)

// proxyEndpoints reads nft's listing of a kube-proxy table: each
// Service's endpoint addresses its service chain sends traffic to. An
// IPv6 table's chain names spell an address's colons as dots.
func proxyEndpoints(listing string, v6 bool) map[string][]string {
	out := map[string][]string{}
	svc := ""
	for _, line := range strings.Split(listing, "\n") {
		if m := serviceChainRE.FindStringSubmatch(line); m != nil {
			svc = m[1]
			continue
		}
		if strings.TrimSpace(line) == "}" {
			svc = ""
			continue
		}
		if svc == "" {
			continue
		}
		var addrs []string
		for _, m := range endpointRE.FindAllStringSubmatch(line, -1) {
			if v6 {
				m[1] = strings.ReplaceAll(m[1], ".", ":")
			}
			addrs = append(addrs, m[1])
		}
		for _, m := range dnatRE.FindAllStringSubmatch(line, -1) {
			addrs = append(addrs, m[1])
		}
		for _, a := range addrs {
			if !slices.Contains(out[svc], a) {
				out[svc] = append(out[svc], a)
			}
		}
	}
	return out
}
