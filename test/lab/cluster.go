// Package lab runs small OpenShift-like clusters in network namespaces
// (test/netlab) for the end-to-end tests, benchmarks and anything else
// that needs real keepalived and haproxy moving real VIPs: nodes brought in
// line by the sidecar's own runtimecfg.Node.Reconcile and running the
// daemons with the static pods' command lines, stand-ins for what a
// cluster would run (apiservers, routers, a workload), clients that poll
// the VIPs, and (kube.go) a real kube-apiserver the nodes' sidecars watch.
// docs/lab.md describes the lab and what it proves. Everything is stopped
// and deleted when the test ends; a failing test gets each node's daemon
// logs, nftables ruleset, local routes and neighbours in its log.
package lab

import (
	"context"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/netlab"
)

// Node is one "node": a namespace running the real keepalived (and
// haproxy on control-plane nodes) with the files runtimecfg writes.
type Node struct {
	Name string
	// Addr is the node's (first) address on the machine network.
	Addr       string
	Host       *netlab.Host
	Target     host.Target
	Keepalived *netlab.Proc
	Haproxy    *netlab.Proc        // nil on workers
	APIServer  *StandIn            // nil on workers
	Routers    map[string]*StandIn // by IngressController
	handover   onnode.Handover
	// node is what the sidecar would keep in line; the lab calls its
	// Reconcile where the sidecar would sync.
	node      *runtimecfg.Node
	stopLocal func() // when a real sidecar takes over
}

// Cluster is a small cluster in a network-namespace lab.
type Cluster struct {
	t      testing.TB
	lab    *netlab.Lab
	Config *v1alpha1.ClusterVIPs
	Nodes  []*Node
	ByName map[string]*Node
	// Client is the namespace the lab's clients (pollers, kept
	// connections) run in.
	Client *netlab.Host
	// State is what the lab's nodes are brought in line with by Apply:
	// tests change it (AddServiceVIP, ...) where a cluster would change.
	State cluster.State
	// base holds every node's root directory.
	base string
	// segments are the L2 segments made so far.
	segments map[string]bool
}

// NodeSpec describes one node of a lab cluster.
type NodeSpec struct {
	Name         string
	Addr         string // CIDR on the machine network
	Addr6        string // optional IPv6 CIDR
	ControlPlane bool
	Labels       map[string]string
	// Segment is the L2 segment the node sits on (default netlab's
	// DefaultSegment); a new name creates it. Nodes of a BGP lab sit on
	// two, joined only by a router (AddRouter).
	Segment string
	// Gateways are the node's default routes (a BGP lab's router).
	Gateways []string
}

// Start builds the lab, renders every node's files through runtimecfg
// (the sidecar's own code path) and starts the daemons.
func Start(t testing.TB, clusterYAML string, specs []NodeSpec) *Cluster {
	t.Helper()
	lc := New(t, clusterYAML)
	lc.StartNodes(specs)
	return lc
}

// New builds the lab's network with its client and no node yet: a test
// can put other hosts on it (a bootstrap host) before StartNodes.
func New(t testing.TB, clusterYAML string) *Cluster {
	t.Helper()
	cfg, err := v1alpha1.Parse([]byte(clusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	lc := &Cluster{t: t, lab: netlab.New(t), Config: cfg, ByName: map[string]*Node{}}
	lc.Client = lc.lab.AddHost("client", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	// Scripts run as keepalived_script, who must be able to reach them:
	// one world-readable base directory (t.TempDir is private).
	lc.base = SharedDir(t, "vipctl-lab-")
	lc.segments = map[string]bool{netlab.DefaultSegment: true}
	return lc
}

// StartNodes adds the nodes, brings each in line through Reconcile and
// starts its daemons and, on control-plane nodes, the apiserver stand-in
// (on spec.api.internalPort too, as the machine config server).
func (lc *Cluster) StartNodes(specs []NodeSpec) {
	t := lc.t
	t.Helper()
	first := len(lc.Nodes)
	for _, s := range specs {
		lc.Nodes = append(lc.Nodes, lc.NewNode(t, s))
	}
	lc.start(lc.Nodes[first:], first == 0, false)
}

// StartNodeOn starts node s, which State lists already (AddToState), on h,
// a host of the lab that ran something else until now: the rendezvous host
// of an in-place bootstrap, rebooted into the control-plane node the node
// list named from the start. As its keepalived pod's init container
// before the sidecar's first sync, its first render is held back
// (render.WithHeldBack): it takes nothing from a peer that serves until
// the test's Apply, the sidecar's sync, renders it in full.
func (lc *Cluster) StartNodeOn(h *netlab.Host, s NodeSpec) *Node {
	t := lc.t
	t.Helper()
	if !slices.ContainsFunc(lc.State.Nodes, func(n cluster.Node) bool { return n.Name == s.Name }) {
		t.Fatalf("node %s is not in the lab's state: AddToState it first", s.Name)
	}
	lc.applyBootSysctls(t, h)
	n := lc.nodeOn(t, s, h)
	lc.Nodes = append(lc.Nodes, n)
	lc.start([]*Node{n}, false, true)
	return n
}

// AddToState lists node s in State without starting it (its host may be
// busy with something else first): the other nodes render it as a peer
// and a backend.
func (lc *Cluster) AddToState(s NodeSpec) {
	lc.t.Helper()
	lc.State.Nodes = append(lc.State.Nodes, lc.clusterNode(lc.t, s))
}

// start brings nodes in line through Reconcile (held back with heldBack)
// and starts their daemons and, on control-plane nodes, the apiserver
// stand-in (on spec.api.internalPort too, as the machine config server).
func (lc *Cluster) start(started []*Node, withClient, heldBack bool) {
	t := lc.t
	t.Helper()
	lc.capture(t, started, withClient)
	for _, n := range started {
		if err := runtimecfg.InitRunFiles(n.Target, lc.Config); err != nil {
			t.Fatal(err)
		}
		lc.apply(n, heldBack)
		// In mode poolsOnly OpenShift's own haproxy fronts the API.
		if lc.isControlPlane(n.Name) && !lc.Config.PoolsOnly() {
			n.APIServer = ServeAPIStandIn(t, n.Host, n.Addr, n.Name, lc.apiServerPorts()...)
			n.Haproxy = n.Host.Start("haproxy", haproxy.Args(n.Target.Root)...)
		}
		n.StartKeepalived()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range started {
				t.Logf("--- %s keepalived log:\n%s", n.Name, n.Keepalived.LogTail(25))
				if n.Haproxy != nil {
					t.Logf("--- %s haproxy log:\n%s", n.Name, n.Haproxy.LogTail(15))
				}
				for _, args := range [][]string{{"nft", "list", "ruleset"}, {"ip", "route", "show", "table", "local", "proto", "118"}, {"ip", "-6", "route", "show", "table", "local", "proto", "118"}, {"ip", "neigh"}, {"ip", "-6", "neigh"}} {
					out, err := n.Host.Exec(args...)
					t.Logf("--- %s %s: %v\n%s", n.Name, strings.Join(args, " "), err, out)
				}
			}
		}
	})
}

// apiServerPorts are where a control-plane node's apiserver stand-in
// answers: the API port and, when set, the machine config server's.
func (lc *Cluster) apiServerPorts() []int32 {
	api := lc.Config.Spec.API
	if api.InternalPort != 0 {
		return []int32{api.Port, api.InternalPort}
	}
	return []int32{api.Port}
}

// NewNode adds a node to the lab's network and to State, with its root
// directory and the local-VIP keeper the sidecar would run, but starts
// nothing on it and does not list it in Nodes: Start does the rest for its
// nodes; a test adding a node later (a node joining after render) starts
// what it wants.
func (lc *Cluster) NewNode(t testing.TB, s NodeSpec) *Node {
	t.Helper()
	addrs := []string{s.Addr}
	if s.Addr6 != "" {
		addrs = append(addrs, s.Addr6)
	}
	if s.Segment != "" {
		lc.AddSegment(s.Segment)
	}
	h := lc.lab.AddHost(s.Name, netlab.HostOpts{Iface: "br-ex", Addrs: addrs, Segment: s.Segment, Gateways: s.Gateways})
	lc.applyBootSysctls(t, h)
	lc.State.Nodes = append(lc.State.Nodes, lc.clusterNode(t, s))
	return lc.nodeOn(t, s, h)
}

// clusterNode is s as the node list names it.
func (lc *Cluster) clusterNode(t testing.TB, s NodeSpec) cluster.Node {
	t.Helper()
	node := cluster.Node{Name: s.Name, Labels: s.Labels, ControlPlane: s.ControlPlane, Interface: "br-ex"}
	node.Addresses = append(node.Addresses, mustAddr(t, strings.Split(s.Addr, "/")[0]))
	if s.Addr6 != "" {
		node.Addresses = append(node.Addresses, mustAddr(t, strings.Split(s.Addr6, "/")[0]))
	}
	return node
}

// nodeOn is node s on host h, with its root directory and the local-VIP
// keeper the sidecar would run.
func (lc *Cluster) nodeOn(t testing.TB, s NodeSpec, h *netlab.Host) *Node {
	t.Helper()
	n := &Node{Name: s.Name, Addr: strings.Split(s.Addr, "/")[0], Host: h, Routers: map[string]*StandIn{},
		Target: host.Target{Root: filepath.Join(lc.base, s.Name), Netns: h.NS}}
	lc.ByName[s.Name] = n
	for _, d := range []string{onnode.RunDir, onnode.HaproxyRunDir, tmpDir} {
		if err := os.MkdirAll(filepath.Join(n.Target.Root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lc.keepLocal(n)
	return n
}

// applyBootSysctls does what the MachineConfig's settings file does on a
// real node at boot.
func (lc *Cluster) applyBootSysctls(t testing.TB, h *netlab.Host) {
	t.Helper()
	for _, f := range render.SysctlFiles(lc.Config) {
		if err := h.ApplySysctl(f.Data); err != nil {
			t.Fatal(err)
		}
	}
}

// StopLocal stops the lab's keeper of the node's local VIPs, as when the
// node's own sidecar takes over (StartSidecar does it) or its pod stops.
func (n *Node) StopLocal() { n.stopLocal() }

// StartKeepalived starts keepalived on the node with its rendered files,
// as the keepalived container does. Its temporary files (the statistics
// SIGUSR2 asks for, KeepalivedStats) go to the node's own directory, as
// they go to the container's own /tmp.
func (n *Node) StartKeepalived() {
	env := []string{"env", "TMPDIR=" + filepath.Join(n.Target.Root, tmpDir)}
	n.Keepalived = n.Host.Start("keepalived", append(env, keepalived.Args(n.Target.Root)...)...)
}

// tmpDir is a node's temporary directory, under its root.
const tmpDir = "/tmp"

// Undrain does what --once does in the node's next keepalived pod: the
// drain file says undrained, and the VIPs kept local since the drain are
// let go.
func (n *Node) Undrain(t testing.TB) {
	t.Helper()
	if err := n.node.Undrain(); err != nil {
		t.Fatal(err)
	}
}

// keepLocal runs what the sidecar runs to keep the VIPs a node holds (and
// held lately) local, so that connections open when a VIP leaves are still
// answered.
func (lc *Cluster) keepLocal(n *Node) {
	local := dataplane.NewLocalVIPs(n.Target, dataplane.HandoverGrace)
	n.node = runtimecfg.NewNode(n.Target, n.Name, local)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		local.Run(ctx, dataplane.LocalResync, func(err error) { lc.t.Errorf("%s: keeping VIPs local: %v", n.Name, err) })
	}()
	var once sync.Once
	n.stopLocal = func() { once.Do(func() { cancel(); <-done }) }
	lc.t.Cleanup(n.stopLocal)
}

func (lc *Cluster) isControlPlane(name string) bool {
	for _, n := range lc.State.Nodes {
		if n.Name == name {
			return n.ControlPlane
		}
	}
	return false
}

// Apply brings the node in line with the lab's config and state through
// the sidecar's own Reconcile (render, judge, atomic write, reload, API
// redirect, handover table, local VIPs).
func (lc *Cluster) Apply(n *Node) runtimecfg.Result {
	lc.t.Helper()
	return lc.apply(n, false)
}

// apply is Apply, at the lowest priority with heldBack (runtimecfg's
// HoldBack, as --once before the first sync).
func (lc *Cluster) apply(n *Node, heldBack bool) runtimecfg.Result {
	lc.t.Helper()
	out, err := n.node.Reconcile(context.Background(), runtimecfg.Input{Model: cluster.Compile(lc.Config), State: lc.State, HoldBack: heldBack})
	if err != nil {
		lc.t.Fatal(err)
	}
	if out.HandoverErr != nil {
		lc.t.Fatal(out.HandoverErr)
	}
	n.handover = out.Handover
	return out.Result
}

// AddServiceVIP allocates a from pool in the lab's state, as the allocator
// would; Apply takes it to a node.
func (lc *Cluster) AddServiceVIP(pool string, a netip.Addr) {
	if lc.State.ServiceVIPs == nil {
		lc.State.ServiceVIPs = map[string][]netip.Addr{}
	}
	lc.State.ServiceVIPs[pool] = append(lc.State.ServiceVIPs[pool], a)
}

// RemoveServiceVIPs releases vips of pool in the lab's state.
func (lc *Cluster) RemoveServiceVIPs(pool string, vips ...netip.Addr) {
	lc.State.ServiceVIPs[pool] = slices.DeleteFunc(lc.State.ServiceVIPs[pool], func(a netip.Addr) bool { return slices.Contains(vips, a) })
}

// Drain starts a planned handover on n, as the sidecar does when the drain
// file changes.
func (lc *Cluster) Drain(n *Node) {
	lc.t.Helper()
	lc.t.Logf("draining %s at %s", n.Name, time.Now().Format("15:04:05.000"))
	if err := n.node.Drain(n.handover); err != nil {
		lc.t.Fatal(err)
	}
}

// Holders lists the nodes that answer for vip right now: it is on one of
// their interfaces, or (an IPv6 Service address of a pool the sidecar announces)
// they have a proxy neighbour entry for it.
func (lc *Cluster) Holders(vip string) []string {
	var out []string
	for _, n := range lc.Nodes {
		// Every interface: a pool's VIPs may live on one of their own.
		got, err := n.Host.Exec("ip", "-o", "addr", "show")
		if err == nil && strings.Contains(string(got), " "+vip+"/") {
			out = append(out, n.Name)
			continue
		}
		if !strings.Contains(vip, ":") {
			continue
		}
		got, err = n.Host.Exec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex")
		if err == nil && slices.Contains(strings.Fields(string(got)), vip) {
			out = append(out, n.Name)
		}
	}
	return out
}

// WaitHolder waits until exactly one node holds vip and it satisfies ok.
func (lc *Cluster) WaitHolder(vip string, timeout time.Duration, ok func(string) bool) string {
	lc.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []string
	for time.Now().Before(deadline) {
		last = lc.Holders(vip)
		if len(last) == 1 && ok(last[0]) {
			return last[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	lc.t.Fatalf("%s: holders %v after %s", vip, last, timeout)
	return ""
}

// WaitNewHolder waits until a node other than old holds vip. old may
// still have it too: a node cut off from the network, or whose keepalived
// was killed, keeps the address (lab-notes pitfall 2).
func (lc *Cluster) WaitNewHolder(vip, old string, timeout time.Duration) string {
	lc.t.Helper()
	var next string
	WaitFor(lc.t, timeout, vip+" held by a node other than "+old, func() bool {
		for _, h := range lc.Holders(vip) {
			if h != old {
				next = h
				return true
			}
		}
		return false
	})
	return next
}

// Settled waits until vip has one holder that keeps it for longer than the
// profile's preempt delay: at start-up the first node to time out takes the
// VIP and the preferred one preempts it a little later.
func (lc *Cluster) Settled(vip string) string {
	lc.t.Helper()
	return lc.SettledAll(vip)[vip]
}

// SettledAll is Settled for several VIPs at once: all of them must keep
// their holders through one quiet period.
func (lc *Cluster) SettledAll(vips ...string) map[string]string {
	lc.t.Helper()
	holders, ok := lc.SettleAll(vips...)
	if !ok {
		lc.t.Fatalf("VIPs never settled on one holder each (last %v)", holders)
	}
	return holders
}

// SettleAll is SettledAll for a caller that does its own reporting: it
// tells whether the VIPs settled, and the last holders it saw.
func (lc *Cluster) SettleAll(vips ...string) (map[string]string, bool) {
	quiet := 3 * time.Second
	if lc.Config.Spec.VRRP.Profile == v1alpha1.ProfileDefault {
		quiet = 12 * time.Second
	}
	deadline := time.Now().Add(quiet + 30*time.Second)
	holders, since := map[string]string{}, time.Now()
	for time.Now().Before(deadline) {
		cur, complete := map[string]string{}, true
		for _, vip := range vips {
			if h := lc.Holders(vip); len(h) == 1 {
				cur[vip] = h[0]
			} else {
				complete = false
			}
		}
		if !maps.Equal(cur, holders) {
			holders, since = cur, time.Now()
		}
		if complete && time.Since(since) > quiet {
			return holders, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return holders, false
}

// WaitFor polls cond every 50 ms and fails t if it does not hold within
// timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitUntil polls cond every 100 ms for up to timeout and tells whether it
// came to hold, for callers that report a failure their own way.
func WaitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

// SharedDir is a temporary directory others may enter (0755; t.TempDir is
// private): the daemons that drop privileges (keepalived's script user,
// FRR's frr) must reach what lies under it. Removed when the test ends.
func SharedDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// AddHost adds another host to the lab's network, one that is no node of
// the cluster (a rogue router, a second client).
func (lc *Cluster) AddHost(name string, o netlab.HostOpts) *netlab.Host {
	return lc.lab.AddHost(name, o)
}

// AddLink gives node n one more interface, iface, on segment (created if
// new) with addrs (CIDR): a VLAN a pool's VIPs live on.
func (lc *Cluster) AddLink(n *Node, segment, iface string, addrs ...string) {
	lc.t.Helper()
	lc.AddSegment(segment)
	lc.lab.AddLink(n.Host, segment, iface, addrs...)
}

// AddSegment adds an L2 segment (a client network behind a router, a
// rack's nodes' segment before they start), unless there is one of that
// name already.
func (lc *Cluster) AddSegment(name string) {
	if !lc.segments[name] {
		lc.lab.AddSegment(name)
		lc.segments[name] = true
	}
}

// AddRouter adds a forwarding host on the named segments (see
// netlab.Lab.AddRouter); the nodes' segments must exist already.
func (lc *Cluster) AddRouter(name string, addrs map[string][]string) *netlab.Host {
	return lc.lab.AddRouter(name, addrs)
}
