package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// bgpLabYAML: the nodes of rack a (198.51.100.0/24) and rack b
// (203.0.113.0/26) announce the "racks" pool to the one router both racks
// hang off, each rack peering with the router's address on its own
// subnet. Timers 1s/3s keep the lab quick; the default is 3s/9s.
const bgpLabYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: bgplab
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, 203.0.113.0/26]
  api:
    vips: [198.51.100.5]
  servicePools:
    - name: racks
      mode: bgp
      addresses: [203.0.113.192/28]
  bgp:
    asn: 64513
    communities: ["64512:100"]
    peers:
      - address: 198.51.100.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        nodeSelector: {rack: a}
      - address: 203.0.113.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        nodeSelector: {rack: b}
`

// upstreamFRR is the router's side: dynamic neighbours from both racks'
// subnets (it needs no list of nodes), ECMP over up to 8 paths.
var upstreamFRR = []string{
	"frr defaults traditional",
	"hostname upstream",
	"log stdout informational",
	"router bgp 64512",
	" bgp router-id 198.51.100.1",
	" no bgp ebgp-requires-policy",
	" neighbor nodes peer-group",
	" neighbor nodes remote-as 64513",
	" neighbor nodes timers 1 3",
	" bgp listen range 198.51.100.0/24 peer-group nodes",
	" bgp listen range 203.0.113.0/26 peer-group nodes",
	" address-family ipv4 unicast",
	"  maximum-paths 8",
	" exit-address-family",
	"exit",
}

type bgpLab struct {
	lc *lab.Cluster
	// router is the upstream router's FRR; nil when a test runs another
	// daemon (BIRD) on routerHost.
	router     *lab.FRR
	routerHost *netlab.Host
	client     *netlab.Host
	frr        map[string]*lab.FRR
}

// startBGPLab builds two racks joined by a router running real FRR, a
// client on a third subnet behind it, and FRR on every node fed by the
// sidecar's own Reconcile. Every node answers on :8080 with its name for
// any address on its lo, where the lab puts the Service addresses the
// node announces (kube-proxy's part on a real node).
func startBGPLab(t testing.TB, bfd bool) *bgpLab {
	t.Helper()
	return buildBGPLab(t, bfd, func(yaml string, specs []lab.NodeSpec) *lab.Cluster { return lab.Start(t, yaml, specs) })
}

// buildBGPLab is startBGPLab with the lab cluster made by start (lab.Start,
// or lab.StartKube's for a lab with a real apiserver and sidecars).
func buildBGPLab(t testing.TB, bfd bool, start func(yaml string, specs []lab.NodeSpec) *lab.Cluster) *bgpLab {
	t.Helper()
	yaml, routerConf := bgpLabYAML, upstreamFRR
	if bfd {
		yaml = strings.ReplaceAll(yaml, "keepaliveTime: 1s\n", "keepaliveTime: 1s\n        bfd: true\n")
		routerConf = withRouterBFD(routerConf)
	}
	lab.RequireFRR(t)
	specs := []lab.NodeSpec{
		{Name: "a0", Addr: "198.51.100.21/24", Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "b0", Addr: "203.0.113.21/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
		{Name: "b1", Addr: "203.0.113.22/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
	}
	lc := start(yaml, specs)
	return newBGPLab(t, lc, map[string][]string{
		netlab.DefaultSegment: {"198.51.100.1/24"},
		"b":                   {"203.0.113.1/26"},
	}, routerConf)
}

// withRouterBFD is upstreamFRR with BFD on its sessions with the nodes
// (FRR's defaults: 300 ms intervals, multiplier 3).
func withRouterBFD(conf []string) []string {
	i := slices.Index(conf, " neighbor nodes timers 1 3")
	return slices.Insert(slices.Clone(conf), i+1, " neighbor nodes bfd")
}

// newBGPLab adds to lc the upstream router (real FRR with routerConf, or
// nothing yet when routerConf is nil) on
// the nodes' segments at routerAddrs and on a third subnet,
// 203.0.113.64/26, with a client behind it; and FRR on every node, its
// frr.conf coming from the node's own Reconcile (none yet is fine: bgpd
// then starts empty), with a server on :8080 answering with the node's
// name for any of its addresses.
func newBGPLab(t testing.TB, lc *lab.Cluster, routerAddrs map[string][]string, routerConf []string) *bgpLab {
	t.Helper()
	lc.AddSegment("c")
	addrs := maps.Clone(routerAddrs)
	addrs["c"] = []string{"203.0.113.65/26"}
	r := lc.AddRouter("upstream", addrs)
	// Hash on ports too, so that one client's connections spread over
	// the paths and the test sees ECMP at work.
	r.MustExec("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1")
	bl := &bgpLab{lc: lc, routerHost: r, frr: map[string]*lab.FRR{}}
	if routerConf != nil {
		dir := lab.SharedDir(t, "vipctl-bgp-router-")
		lab.WriteFRRConf(t, dir, routerConf...)
		bl.router = lab.StartFRR(t, r, dir)
	}
	bl.client = lc.AddHost("outside", netlab.HostOpts{Iface: "eth0", Addrs: []string{"203.0.113.70/26"}, Segment: "c", Gateways: []string{"203.0.113.65"}})
	for _, n := range lc.Nodes {
		bl.frr[n.Name] = startBGPNode(t, n)
	}
	return bl
}

// startBGPNode starts n's FRR and a server on :8080 answering with n's
// name, and puts vips on n's lo (kube-proxy's part on a real node).
func startBGPNode(t testing.TB, n *lab.Node, vips ...string) *lab.FRR {
	t.Helper()
	f := lab.StartFRR(t, n.Host, n.Target.Root)
	name := n.Name
	n.Host.Serve(":8080", func(c net.Conn) { _, _ = io.WriteString(c, name) })
	for _, vip := range vips {
		if strings.Contains(vip, ":") {
			n.Host.MustExec("ip", "-6", "addr", "add", vip+"/128", "dev", "lo")
		} else {
			n.Host.MustExec("ip", "addr", "add", vip+"/32", "dev", "lo")
		}
	}
	return f
}

// applyAll brings every node in line with the lab's state through the
// sidecar's Reconcile (frr.conf judged, written, frr-reload.py).
func (bl *bgpLab) applyAll(t testing.TB) {
	t.Helper()
	for _, n := range bl.lc.Nodes {
		bl.lc.Apply(n)
	}
}

// bgpClusterVIP is the Cluster-policy Service address of the ECMP test
// and the bench.
const bgpClusterVIP = "203.0.113.200"

// announceEverywhere allocates vip to the pool (policy Cluster), puts it
// on every node's lo, brings the nodes in line and waits for the router's
// route with every node as a next hop, which it returns.
func (bl *bgpLab) announceEverywhere(t testing.TB, vip string) []string {
	t.Helper()
	bl.lc.AddServiceVIP("racks", netip.MustParseAddr(vip))
	for _, n := range bl.lc.Nodes {
		onLo(t, n.Host, vip)
	}
	bl.applyAll(t)
	all := []string{"198.51.100.21", "203.0.113.21", "203.0.113.22"}
	bl.waitHops(t, vip, all, 20*time.Second)
	return all
}

func onLo(t testing.TB, h *netlab.Host, vip string) {
	t.Helper()
	h.MustExec("ip", "addr", "add", vip+"/32", "dev", "lo")
}

// nextHops reads the router's kernel route to vip: the next hops zebra
// installed from BGP, one per announcing node.
func (bl *bgpLab) nextHops(vip string) []string { return routeHops(bl.routerHost, vip) }

// routeHops reads h's kernel route to vip/32 (vip/128) and returns its
// next hops, sorted (IPv6 ones are the nodes' link-local addresses).
func routeHops(h *netlab.Host, vip string) []string {
	family, host := "-4", vip+"/32"
	if strings.Contains(vip, ":") {
		family, host = "-6", vip+"/128"
	}
	out, err := h.Exec("ip", family, "route", "show", host)
	if err != nil {
		return nil
	}
	var hops []string
	for _, f := range strings.Fields(string(out)) {
		if a, err := netip.ParseAddr(f); err == nil && f != vip {
			hops = append(hops, a.String())
		}
	}
	slices.Sort(hops)
	return slices.Compact(hops)
}

func (bl *bgpLab) waitHops(t testing.TB, vip string, want []string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if !lab.WaitUntil(timeout, func() bool { return slices.Equal(bl.nextHops(vip), want) }) {
		var out string
		if bl.router != nil {
			out, _ = bl.router.Vtysh("show bgp summary")
		}
		t.Fatalf("route %s: next hops %v, want %v after %s\n%s", vip, bl.nextHops(vip), want, timeout, out)
	}
	return time.Since(start)
}

// ask opens n connections from the client to vip:8080 and counts which
// node answered each.
func (bl *bgpLab) ask(t testing.TB, vip string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := bl.client.DialContext(ctx, "tcp", net.JoinHostPort(vip, "8080"))
		cancel()
		if err != nil {
			got["error: "+err.Error()]++
			continue
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		_ = c.Close()
		got[string(b)]++
	}
	return got
}

// TestBGPTwoRacksECMP: nodes on two subnets announce a Cluster-policy
// Service address; the upstream router (real FRR) installs it with one
// next hop per node (multipath) and carries the pool's community; a
// client behind the router reaches the address and is spread over nodes
// of both racks; a node that vanishes is withdrawn within its hold time
// (3s here), or within BFD's detection time (3 x 300 ms) with bfd on, and
// the client keeps being served by the others.
func TestBGPTwoRacksECMP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bfd   bool
		bound time.Duration
	}{
		{"hold-time", false, 5 * time.Second},
		{"bfd", true, 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) { testBGPTwoRacks(t, tc.bfd, tc.bound) })
	}
}

func testBGPTwoRacks(t *testing.T, bfd bool, bound time.Duration) {
	bl := startBGPLab(t, bfd)
	all := bl.announceEverywhere(t, bgpClusterVIP)
	const vip = bgpClusterVIP
	if out, _ := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32"); !strings.Contains(out, "64512:100") {
		t.Errorf("the route does not carry community 64512:100:\n%s", out)
	}
	if bfd {
		bl.waitBFDUp(t, 3)
	}
	got := bl.ask(t, vip, 60)
	t.Logf("answers: %v", got)
	for k := range got {
		if strings.HasPrefix(k, "error") {
			t.Errorf("client failed: %v", got)
		}
	}
	if got["a0"] == 0 || got["b0"]+got["b1"] == 0 {
		t.Errorf("want answers from both racks through ECMP, got %v", got)
	}

	gone, lastFail, _ := bl.loseNode(t, vip, bl.lc.ByName["b1"].Host.LinkDown, all[:2])
	t.Logf("bfd=%v: b1 withdrawn %s after its link went; last failed client connection at %s", bfd, gone.Round(time.Millisecond), lastFail.Round(time.Millisecond))
	if gone > bound {
		t.Errorf("withdrawal took %s, want within %s", gone, bound)
	}
	got = bl.ask(t, vip, 20)
	if got["b1"] != 0 || got["a0"]+got["b0"] != 20 {
		t.Errorf("after b1 left, answers %v: want all 20 from a0 and b0", got)
	}
}

// waitBFDUp waits until the router has n BFD sessions up, and returns
// how long that took. A node lost before its session is up is detected
// by the hold timer alone, whatever BFD would have done.
func (bl *bgpLab) waitBFDUp(t testing.TB, n int) time.Duration {
	t.Helper()
	start := time.Now()
	lab.WaitFor(t, 30*time.Second, fmt.Sprintf("%d BFD sessions up on the router", n), func() bool {
		out, _ := bl.router.Vtysh("show bfd peers brief")
		return strings.Count(out, " up ") >= n
	})
	return time.Since(start)
}

// loseNode takes a node off the network without a word (lose: its
// switch port leaves the bridge) while a client opens a connection to
// vip every 10 ms (200 ms timeout), and returns when the router's route
// has the next hops left plus a second: how long the withdrawal took,
// when the last connection failed (the outage the flows hashed to the
// lost node saw) and how many failed.
//
// The fault comes at a random moment of the sessions' keepalive second
// (keepalivePhase): the router's hold timer runs from the last message
// it heard from the node, and right after the route appeared that
// message is the UPDATE that carried it, so a fault injected at once
// would always meet the full hold time, never the keepalive cycle a
// failure at any other moment meets.
func (bl *bgpLab) loseNode(t testing.TB, vip string, lose func(), left []string) (withdrawn, lastFail time.Duration, failed int) {
	t.Helper()
	time.Sleep(keepalivePhase())
	type result struct {
		last   time.Duration
		failed int
	}
	stop := make(chan struct{})
	done := make(chan result)
	down := time.Now()
	go func() {
		var r result
		for {
			select {
			case <-stop:
				done <- r
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			c, err := bl.client.DialContext(ctx, "tcp", vip+":8080")
			cancel()
			if err != nil {
				r.last = time.Since(down)
				r.failed++
			} else {
				_ = c.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	lose()
	withdrawn = bl.waitHops(t, vip, left, 15*time.Second)
	time.Sleep(time.Second)
	close(stop)
	r := <-done
	return withdrawn, r.last, r.failed
}

// keepalivePhase is a wait of one keepalive interval of the labs'
// sessions (1 s) plus a random part of another: a fault after it falls
// anywhere in the keepalive cycle, as a real one does.
func keepalivePhase() time.Duration {
	return time.Second + rand.N(time.Second)
}

// bgpLocalVIP is the Local-policy Service address of the racks pool in
// the tests that move its endpoints (setLocal).
const bgpLocalVIP = "203.0.113.201"

// setLocal makes bgpLocalVIP a Local Service's address with ready
// endpoints on nodes and terminating ones still serving on draining, and
// brings every node in line.
func (bl *bgpLab) setLocal(t testing.TB, nodes, draining []string) {
	t.Helper()
	bl.lc.State.LocalServices = []cluster.LocalService{{Name: "web/local", Pool: "racks",
		VIPs: []netip.Addr{netip.MustParseAddr(bgpLocalVIP)}, Nodes: nodes, Draining: draining}}
	bl.applyAll(t)
}

// TestBGPLocalPolicy: a Local-policy Service address is announced only by
// the nodes running a ready endpoint, and follows the endpoint when it
// moves; the node's Reconcile says what it announces (what the sidecar
// publishes under bgp/<pool>).
func TestBGPLocalPolicy(t *testing.T) {
	bl := startBGPLab(t, false)
	const vip = bgpLocalVIP
	for _, n := range bl.lc.Nodes {
		onLo(t, n.Host, vip)
	}
	drainingLocal := func(nodes, draining []string) { bl.setLocal(t, nodes, draining) }
	local := func(nodes ...string) { drainingLocal(nodes, nil) }
	local("b0")
	bl.waitHops(t, vip, []string{"203.0.113.21"}, 20*time.Second)
	if got := bl.ask(t, vip, 10); got["b0"] != 10 {
		t.Errorf("answers %v: want all from b0, the only node with an endpoint", got)
	}
	local("a0", "b1")
	took := bl.waitHops(t, vip, []string{"198.51.100.21", "203.0.113.22"}, 20*time.Second)
	t.Logf("endpoint moved: routes followed in %s", took.Round(time.Millisecond))
	if got := bl.ask(t, vip, 20); got["b0"] != 0 || got["a0"]+got["b1"] != 20 {
		t.Errorf("answers %v: want all from a0 and b1", got)
	}
	// a0's endpoint terminates while b1's serves (a drain): a0's route
	// turns into a backup by policy alone, its network line kept, and
	// the router drops it from the ECMP set. bgpd applies the policy
	// change a second later (`bgp route-map delay-timer 1`), not after
	// its default 5 s delay, in which a drained node's pod could end
	// while the router still sends it traffic.
	for _, n := range []string{"a0", "b1"} {
		if run, err := bl.frr[n].Vtysh("show running-config"); err != nil || !strings.Contains(run, "bgp route-map delay-timer 1") {
			t.Errorf("%s's bgpd runs without `bgp route-map delay-timer 1` (%v):\n%s", n, err, run)
		}
	}
	drainingLocal([]string{"b1"}, []string{"a0"})
	took = bl.waitHops(t, vip, []string{"203.0.113.22"}, 20*time.Second)
	t.Logf("a0's endpoint draining, b1's ready: routed to b1 alone in %s (a0's route a backup by policy)", took.Round(time.Millisecond))
	// A rollout: b1's pod goes, a0's stops (terminating, still
	// serving) before the new one on b0 is ready. a0 keeps a backup
	// route, the router's only one, so the address stays reachable.
	// a0's route turns into a backup without being withdrawn on the way
	// (its network line stays; only the outbound policy changes).
	var gone atomic.Bool
	watching, stopWatching := context.WithCancel(t.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watching.Err() == nil {
			if len(bl.nextHops(vip)) == 0 {
				gone.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	drainingLocal(nil, []string{"a0"})
	took = bl.waitHops(t, vip, []string{"198.51.100.21"}, 20*time.Second)
	t.Logf("only a draining endpoint left: routed to a0 alone in %s", took.Round(time.Millisecond))
	lab.WaitFor(t, 20*time.Second, "a0's route a backup (AS path 64513 ×4)", func() bool {
		out, err := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32")
		return err == nil && strings.Contains(out, "64513 64513 64513 64513")
	})
	stopWatching()
	<-watched
	if gone.Load() {
		t.Errorf("the router had no route to %s while a0's turned into a backup", vip)
	}
	if got := bl.ask(t, vip, 10); got["a0"] != 10 {
		t.Errorf("answers %v: want all from a0, the draining endpoint's node", got)
	}
	// b0's new pod is ready: its plain route beats a0's backup one,
	// which is no equal-cost partner of it.
	drainingLocal([]string{"b0"}, []string{"a0"})
	took = bl.waitHops(t, vip, []string{"203.0.113.21"}, 20*time.Second)
	t.Logf("a ready endpoint on b0: routed to b0 alone in %s", took.Round(time.Millisecond))
	out, err := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32")
	if err != nil || !strings.Contains(out, "64513 64513 64513 64513") {
		t.Errorf("the router does not keep a0's backup path (AS path 64513 ×4) beside b0's: %v\n%s", err, out)
	}
	// The sessions never reset on a reload: frr-reload.py sent only the
	// changed network lines, so each node's session was established once
	// and never dropped.
	out, _ = bl.router.Vtysh("show bgp neighbors")
	if n := strings.Count(out, "Connections established 1; dropped 0"); n != 3 {
		t.Errorf("%d of 3 sessions established once and never dropped:\n%s", n, out)
	}
}

// bgpUpdateYAML: one segment, 198.51.100.0/24, with the web pool on the
// workers in mode vrrp, and spec.bgp already in the nodes' static file
// (adding it is a MachineConfig rollout, done before any pool moves).
// Timers 1s/3s keep the lab quick.
const bgpUpdateYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
  servicePools:
    - name: web
      mode: vrrp
      addresses: [198.51.100.128/27]
      nodeSelector: {pool: web}
  bgp:
    asn: 64513
    peers:
      - address: 198.51.100.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
  vrrp: {profile: fast, mode: unicast}
`

// TestBGPUpdateKeepsAddresses: a pool moved from vrrp to bgp with
// `vipctl update --set-pool-mode` keeps its Services' addresses. Before the move the
// addresses are VRRP VIPs on the workers, reached by a client behind the
// router over the shared segment; the plan names the mode change and the
// VRRP IDs it frees; afterwards every Service holds the address it had,
// the pool's VRRP instances are gone from every node's keepalived.conf,
// the workers' sidecars render frr.conf announcing the addresses (bgpd
// ran empty until then), the router installs each address with the
// workers as next hops, and the client reaches the addresses through the
// routes.
func TestBGPUpdateKeepsAddresses(t *testing.T) {
	lab.RequireFRR(t)
	workers := []string{"198.51.100.21", "198.51.100.22"}
	gw := []string{"198.51.100.1"}
	kc := lab.StartKube(t, bgpUpdateYAML, []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true, Gateways: gw},
		{Name: "worker-0", Addr: workers[0] + "/24", Labels: map[string]string{"pool": "web"}, Gateways: gw},
		{Name: "worker-1", Addr: workers[1] + "/24", Labels: map[string]string{"pool": "web"}, Gateways: gw},
	})
	bl := newBGPLab(t, kc.Cluster, map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}}, upstreamFRR)
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}

	// Two Services get addresses from the vrrp pool; keepalived carries
	// them and the client reaches them through the router's connected
	// route to the segment.
	names := []string{"shop", "blog"}
	before := map[string][]string{}
	var vips []string
	for _, name := range names {
		kc.CreateLBService(t, name, "")
		before[name] = waitServiceIPs(t, kc.Admin, "default", name, 1)
		vips = append(vips, before[name]...)
	}
	for _, vip := range vips {
		for _, w := range []string{"worker-0", "worker-1"} {
			kc.WaitConf(t, w, vip, func(c string) bool { return strings.Contains(c, vip+"/32") })
		}
		holder := kc.Settled(vip)
		if got := bl.ask(t, vip, 5); got[holder] != 5 {
			t.Fatalf("over VRRP, %s: answers %v, want all 5 from its holder %s", vip, got, holder)
		}
	}
	for _, vip := range vips {
		if hops := bl.nextHops(vip); len(hops) > 0 {
			t.Fatalf("the router routes %s to %v before any pool is bgp", vip, hops)
		}
	}

	kubeconfig, file := updateFiles(t, kc.API, bgpUpdateYAML)
	moved := time.Now()
	code, out, errOut := vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig, "--set-pool-mode", "web=bgp")
	if code != 0 {
		t.Fatalf("update: exit %d\n%s%s", code, out, errOut)
	}
	if got, want := readFile(t, file), strings.Replace(bgpUpdateYAML, "mode: vrrp", "mode: bgp", 1); got != want {
		t.Errorf("the file after --set-pool-mode:\n%s\nwant only the mode line changed:\n%s", got, want)
	}
	t.Logf("plan:\n%s", out)
	for _, want := range []string{"~ pool web (frees VRRP IDs pool/web/0=", "    spec.servicePools[0].mode: vrrp -> bgp\n", "no MachineConfig change"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "would lose") {
		t.Errorf("the plan takes addresses from Services:\n%s", out)
	}

	// The pool's instances leave every node; then the lab puts the
	// addresses on the workers' lo (kube-proxy's part on a real node).
	for _, n := range kc.Nodes {
		kc.WaitConf(t, n.Name, "no instance of the web pool", func(c string) bool { return !strings.Contains(c, "pool_web_") })
	}
	released := time.Since(moved)
	for _, w := range []string{"worker-0", "worker-1"} {
		for _, vip := range vips {
			onLo(t, kc.ByName[w].Host, vip)
		}
		conf := filepath.Join(kc.ByName[w].Target.Root, onnode.FRRConfPath)
		var last string
		ok := lab.WaitUntil(30*time.Second, func() bool {
			data, _ := os.ReadFile(conf)
			last = string(data)
			return !slices.ContainsFunc(vips, func(vip string) bool { return !strings.Contains(last, " network "+vip+"/32\n") })
		})
		if !ok {
			t.Fatalf("%s: frr.conf never announced %v; last:\n%s", w, vips, last)
		}
		// bgpd started empty and was never restarted: the file reached it
		// through the sidecar's frr-reload.py.
		lab.WaitFor(t, 10*time.Second, w+"'s running bgpd announces every address", func() bool {
			run, _ := bl.frr[w].Vtysh("show running-config")
			return !slices.ContainsFunc(vips, func(vip string) bool { return !strings.Contains(run, " network "+vip+"/32\n") })
		})
	}
	if data, err := os.ReadFile(filepath.Join(kc.ByName["master-0"].Target.Root, onnode.FRRConfPath)); err == nil && strings.Contains(string(data), "  network ") {
		t.Errorf("master-0, outside the pool, announces:\n%s", data)
	}
	for _, vip := range vips {
		bl.waitHops(t, vip, workers, 30*time.Second)
		// Mostly the nodes' first BGP sessions coming up: before its
		// first bgp pool a node renders no frr.conf, so it has none.
		t.Logf("%s: out of keepalived.conf %s, routed to both workers %s after vipctl update started", vip, released.Round(time.Millisecond), time.Since(moved).Round(time.Millisecond))
		got := bl.ask(t, vip, 20)
		if got["worker-0"]+got["worker-1"] != 20 {
			t.Errorf("through the routes, %s: answers %v, want all 20 from the workers", vip, got)
		}
	}
	for _, name := range names {
		s, err := kc.Admin.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var now []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			now = append(now, in.IP)
		}
		if !slices.Equal(now, before[name]) {
			t.Errorf("Service %s: addresses %v after the move, had %v", name, now, before[name])
		}
	}
}

// TestBGPSessions: every node's real sidecar (the node's own credentials
// against a real kube-apiserver) reads its bgpd's sessions and publishes
// them; `vipctl status` shows each node's session Established with the
// route it announces and exits 0. A node cut off from its router shows
// its session not Established in its annotation, its metrics and `vipctl
// status`, which then exits 2. A router stopped fires VipctlBGPSessionDown
// and VipctlBFDPeerDown for every node, which resolve when it goes on.
func TestBGPSessions(t *testing.T) {
	bl, kc := startBGPSidecars(t, func(bl *bgpLab) {
		// First the session reader alone, against the live bgpd of a0.
		lab.WaitFor(t, 20*time.Second, "a0's session Established", func() bool {
			peers, ok, err := frr.ReadSessions(context.Background(), bl.lc.ByName["a0"].Target)
			return err == nil && ok && len(peers) == 1 && peers[0].State == v1alpha1.BGPStateEstablished && peers[0].Peer == "198.51.100.1"
		})
	})

	sessions := func(node string) v1alpha1.BGPSessions {
		n, err := kc.Admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := v1alpha1.ParseBGPSessions(n.Annotations[v1alpha1.AnnotationNodeBGPSessions])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	peerOf := map[string]string{"a0": "198.51.100.1", "b0": "203.0.113.1", "b1": "203.0.113.1"}
	for node, peer := range peerOf {
		lab.WaitFor(t, 20*time.Second, node+" publishes its session Established, 1 route, BFD up", func() bool {
			s := sessions(node)
			return len(s) == 1 && s[0].Peer == peer && s[0].Established() && s[0].PrefixesSent == 1 && s[0].BFD == "Up" && s[0].ASN == 64512
		})
		m := kc.Sidecars[node].Metrics.BGP
		if up, pfx := testutil.ToFloat64(m.Up.WithLabelValues(peer)), testutil.ToFloat64(m.Announced.WithLabelValues(peer)); up != 1 || pfx != 1 {
			t.Errorf("%s: vipctl_bgp_session_up %v, vipctl_bgp_announced_prefixes %v; want 1, 1", node, up, pfx)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), kubeconfig)
	code, out, errOut := vipctl(t, "status", "-f", kc.ConfigPath, "--kubeconfig", kubeconfig)
	t.Logf("vipctl status (sessions up), exit %d:\n%s%s", code, out, errOut)
	for _, want := range []string{"NODE  PEER", "a0    198.51.100.1  64512  Established", "b0    203.0.113.1   64512  Established", "b1    203.0.113.1   64512  Established"} {
		if !strings.Contains(out, want) {
			t.Errorf("vipctl status lacks %q", want)
		}
	}
	// The API VIP is keepalived's: its holder may still be settling.
	if strings.Contains(errOut, "BGP session") {
		t.Errorf("sessions up, yet status reports a session problem: %s", errOut)
	}
	// The router stopped (its FRR frozen: a hung router, which answers
	// neither BGP nor BFD): every session and BFD peer down fires its
	// alert, for each node, in a real Prometheus evaluating the rendered
	// rules; the router going on, they resolve. (A restarted router's
	// bgpd may register its BFD sessions before its zebra connection is
	// up, and FRR never installs them: BFD would stay down.)
	cfg, err := v1alpha1.Parse([]byte(bgpLabYAML))
	if err != nil {
		t.Fatal(err)
	}
	w := watchAlerts(t, cfg, sidecarTargets(kc)...)
	// The lab's API VIP has one eligible node (a0, alone on its
	// subnet), whose instance is left out: held by nobody, as `vipctl
	// status` says too.
	apiNotHeld := "VipctlVIPNotHeld vip=198.51.100.5"
	w.expect("sessions up", apiNotHeld)
	router := func(sig syscall.Signal, procs ...*netlab.Proc) {
		for _, p := range procs {
			if err := p.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
	}
	router(syscall.SIGSTOP, bl.router.Bgpd, bl.router.Bfdd, bl.router.Zebra)
	down := []string{apiNotHeld}
	for node, peer := range peerOf {
		down = append(down, "VipctlBGPSessionDown node="+node+" peer="+peer, "VipctlBFDPeerDown node="+node+" peer="+peer)
	}
	w.expect("the router stopped", down...)
	// zebra and bfdd go on first, bgpd once they have worked off what
	// piled up while stopped: a node whose session came up the moment
	// all three went on together (its connect retry due right then) once
	// had its BFD session never installed on the router, which kept its
	// BFD peer down for good (a CI rehearsal, 2026-11-27). That is FRR's
	// race on the router, not the nodes'.
	router(syscall.SIGCONT, bl.router.Zebra, bl.router.Bfdd)
	time.Sleep(2 * time.Second)
	router(syscall.SIGCONT, bl.router.Bgpd)
	w.expect("the router going on", apiNotHeld)

	published := sessions("a0")
	writes := func() int { return strings.Count(kc.Sidecars["a0"].Log.String(), "published BGP sessions") }
	writesBefore := writes()

	bl.lc.ByName["b1"].Host.LinkDown()
	lab.WaitFor(t, 20*time.Second, "b1 publishes its session not Established", func() bool {
		s := sessions("b1")
		return len(s) == 1 && !s[0].Established()
	})
	if up := testutil.ToFloat64(kc.Sidecars["b1"].Metrics.BGP.Up.WithLabelValues("203.0.113.1")); up != 0 {
		t.Errorf("b1: vipctl_bgp_session_up %v after its link went, want 0", up)
	}
	code, out, errOut = vipctl(t, "status", "-f", kc.ConfigPath, "--kubeconfig", kubeconfig)
	t.Logf("vipctl status (b1 cut off), exit %d:\n%s%s", code, out, errOut)
	if code != 2 || !strings.Contains(errOut, "BGP session(s) not established: b1→203.0.113.1") {
		t.Errorf("b1 cut off: exit %d, stderr %q; want 2 naming b1's session", code, errOut)
	}
	code, out, _ = vipctl(t, "status", "-f", kc.ConfigPath, "--kubeconfig", kubeconfig, "-o", "json")
	var report status.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 2 || len(report.BGPSessions) != 3 {
		t.Errorf("status -o json: exit %d, %v, %d sessions (want 3):\n%s", code, err, len(report.BGPSessions), out)
	}
	// b0's bgpd crashes: its session must not go on showing Established.
	_ = bl.frr["b0"].Bgpd.Signal(syscall.SIGKILL)
	lab.WaitFor(t, 20*time.Second, "b0 publishes its session Unknown", func() bool {
		s := sessions("b0")
		return len(s) == 1 && s[0].State == v1alpha1.BGPStateUnknown
	})
	code, out, errOut = vipctl(t, "status", "-f", kc.ConfigPath, "--kubeconfig", kubeconfig)
	t.Logf("vipctl status (b0's bgpd killed), exit %d:\n%s%s", code, out, errOut)
	if code != 2 || !strings.Contains(errOut, "b0→203.0.113.1 Unknown") {
		t.Errorf("b0's bgpd killed: exit %d, stderr %q; want 2 naming b0's session", code, errOut)
	}
	// a0 saw nothing change: its annotation was not rewritten (the same
	// Since, though its uptime kept counting).
	if again := sessions("a0"); again.String() != published.String() || writes() != writesBefore {
		t.Errorf("a0's sessions rewritten without a change (%d writes, then %d):\n%s\n%s", writesBefore, writes(), published, again)
	}
}

// startBGPSidecars is the BGP lab (BFD on) with the real apiserver: every
// node registered, a Cluster Service at bgpClusterVIP on every node's lo,
// and each node's real sidecar running; it returns once the router
// routes the address to all three nodes. before runs once the lab is up,
// before any sidecar.
func startBGPSidecars(t *testing.T, before func(*bgpLab)) (*bgpLab, *lab.KubeCluster) {
	t.Helper()
	var kc *lab.KubeCluster
	bl := buildBGPLab(t, true, func(yaml string, specs []lab.NodeSpec) *lab.Cluster {
		kc = lab.StartKube(t, yaml, specs)
		return kc.Cluster
	})
	if before != nil {
		before(bl)
	}
	for _, n := range bl.lc.Nodes {
		kc.AddNode(t, n.Name)
	}
	kc.GrantNodeReaders(t)
	kc.CreateLBService(t, "web", "")
	kc.SetLBStatus(t, "web", bgpClusterVIP)
	for _, n := range bl.lc.Nodes {
		onLo(t, n.Host, bgpClusterVIP)
		kc.StartSidecar(t, n.Name)
	}
	bl.waitHops(t, bgpClusterVIP, []string{"198.51.100.21", "203.0.113.21", "203.0.113.22"}, 30*time.Second)
	return bl, kc
}
