// Package bootstrap holds the API VIP while an OpenShift cluster installs
// (`vipctl bootstrap`, docs/bootstrap.md). The control-plane nodes fetch
// their first Ignition from api-int:22623 and the installer waits on
// api:6443, both served by the bootstrap machine, before any vipctl pod
// runs: the bootstrap host (the bootstrap machine itself, or any host on
// the API VIP's segment) runs keepalived and haproxy for the API VIP,
// brought in line by runtimecfg.Node.Reconcile like every node, with its
// files from the same plan (render.BootstrapNode). Once the control-plane
// nodes answer through their own haproxy, it yields the VIP to them
// make-before-break (its drain file: priority 1, a node preempts while it
// still answers), keeps serving the connections it had for a grace
// period, then stops and leaves nothing behind in the network namespace.
package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// Options are the inputs of `vipctl bootstrap`.
type Options struct {
	// Config is the ClusterVIPs file; it must name the bootstrap host
	// (spec.bootstrap).
	Config string
	// Nodes is the node list the MachineConfigs were rendered with
	// (`vipctl render --nodes`): its control-plane nodes are the VRRP
	// peers, haproxy's other backends, and whom the VIP is yielded to.
	Nodes string
	// Interface carries VRRP and the VIP. Empty: the interface that holds
	// spec.bootstrap.addresses.
	Interface string
	// Servers are where the bootstrap machine's kube-apiserver and
	// machine config server answer, one per family. Empty: this host
	// (spec.bootstrap.addresses).
	Servers []netip.Addr
	// Dir holds everything this run writes, under the node paths
	// (keepalived.conf at Dir/etc/vipctl-keepalived/keepalived.conf, pid files,
	// sockets) and the daemons' logs (Dir/keepalived.log, haproxy.log).
	Dir string
	// YieldAfter is how long the control-plane nodes must answer without
	// a break before the VIP is given to them.
	YieldAfter time.Duration
	// Grace is how long after the VIP left this host keeps serving: the
	// connections it accepted finish (the nodes' handover tables send
	// their segments here meanwhile).
	Grace time.Duration
	// BGPSecrets are Secret manifests (files) holding the session
	// passwords of the routers the host peers with, for a routed API VIP:
	// one for each passwordSecret of the peers spec.bootstrap.labels
	// select (bgpPasswords).
	BGPSecrets []string
	// SkipFirewallCheck starts without asking whether the host's own
	// firewall lets the nodes' VRRP adverts and the VIP's connections in.
	SkipFirewallCheck bool
	// Log tells what happens; nil discards it.
	Log *slog.Logger
}

// Result is what a run did, for people (Text) and scripts (-o json).
type Result struct {
	VIPs      []string `json:"vips"`
	Interface string   `json:"interface"`
	// AlreadyServed says the control-plane nodes answered before anything
	// started: the VIP is theirs and nothing ran.
	AlreadyServed bool `json:"alreadyServed,omitempty"`
	// ServedAt is when the VIP came up here; YieldedAt when this host
	// lowered its priority; LeftAt when a control-plane node had taken
	// the VIP (it left this host); StoppedAt when keepalived and haproxy
	// had stopped.
	ServedAt  *time.Time `json:"servedAt,omitempty"`
	YieldedAt *time.Time `json:"yieldedAt,omitempty"`
	LeftAt    *time.Time `json:"leftAt,omitempty"`
	StoppedAt *time.Time `json:"stoppedAt,omitempty"`
	// HandoverMillis is LeftAt - YieldedAt.
	HandoverMillis int64 `json:"handoverMillis,omitempty"`
	// InPlace is the control-plane node this host reboots into after the
	// install bootstrapped (the agent-based installer's rendezvous host:
	// spec.bootstrap names that node's address); empty for a bootstrap
	// machine of its own.
	InPlace string `json:"inPlace,omitempty"`
}

// Text is the result for people.
func (r *Result) Text() string {
	if r.AlreadyServed {
		return fmt.Sprintf("the control-plane nodes already answer for %v: nothing to do\n", r.VIPs)
	}
	at := func(t *time.Time) string { return t.Format("15:04:05.000") }
	out := ""
	if r.InPlace != "" {
		out += fmt.Sprintf("in place: this host is node %s after its reboot\n", r.InPlace)
	}
	if r.ServedAt != nil {
		out += fmt.Sprintf("served %v on %s from %s\n", r.VIPs, r.Interface, at(r.ServedAt))
	}
	if r.YieldedAt != nil && r.LeftAt != nil {
		out += fmt.Sprintf("yielded at %s; a control-plane node held the VIP %d ms later\n", at(r.YieldedAt), r.HandoverMillis)
	}
	if r.StoppedAt != nil {
		out += fmt.Sprintf("keepalived and haproxy stopped at %s\n", at(r.StoppedAt))
	}
	return out
}

// Defaults of Options.
const (
	DefaultYieldAfter = 30 * time.Second
	DefaultDir        = "/run/vipctl-bootstrap"
)

// probeInterval is how often the control-plane nodes are asked whether
// they answer, and probeTimeout how long each question may take.
const (
	probeInterval = time.Second
	probeTimeout  = time.Second
)

// machine is one run's fixed facts (the bootstrap host's).
type machine struct {
	o Options
	c *v1alpha1.ClusterVIPs
	// model is c compiled, once.
	model *cluster.Model
	state cluster.State
	// masters are the control-plane nodes the VIP may go to: every one
	// but the node this host reboots into (inPlace).
	masters []cluster.Node
	// inPlace is that node's name, "" for a bootstrap machine of its own.
	inPlace string
	vips    []netip.Addr
	log     *slog.Logger
	client  *http.Client
}

// Run holds the API VIP until the control-plane nodes answer, yields it
// to them, and stops. It returns when keepalived and haproxy have
// stopped, or at once when the nodes already answer. ctx ending stops it
// early, yielding first when the nodes answer.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	h, err := prepare(o)
	if err != nil {
		return nil, err
	}
	res := &Result{Interface: h.state.Bootstrap.Interface, InPlace: h.inPlace}
	for _, v := range h.vips {
		res.VIPs = append(res.VIPs, v.String())
	}
	if h.inPlace != "" {
		h.log.Info("in place: this host reboots into a control-plane node after the bootstrap; the VIP goes to another one before that", "node", h.inPlace)
	}
	if up := h.answering(ctx); len(up) > 0 {
		h.log.Info("the control-plane nodes already answer through their haproxy; the API VIP is theirs", "nodes", up)
		res.AlreadyServed = true
		return res, nil
	}
	if err := h.checkFirewall(ctx); err != nil {
		return nil, err
	}
	t := host.Target{Root: o.Dir}
	for _, d := range []string{onnode.RunDir, onnode.HaproxyRunDir} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(runtimecfg.InitRunFiles(t, h.c), dataplane.Undrain(t)); err != nil {
		return nil, err
	}
	local := dataplane.NewLocalVIPs(t, o.Grace)
	node := runtimecfg.NewNode(t, render.BootstrapNode, local)
	out, err := node.Reconcile(ctx, runtimecfg.Input{Model: h.model, State: h.state, From: o.Config})
	if err == nil && len(out.Lonely) > 0 {
		err = errors.New(strings.Join(out.Lonely, "; "))
	}
	if err = errors.Join(err, out.HandoverErr); err != nil {
		return nil, errors.Join(err, node.Leave())
	}
	h.log.Info("configs written and judged by keepalived and haproxy", "dir", o.Dir, "written", out.Written)

	localCtx, stopLocal := context.WithCancel(context.Background())
	localDone := make(chan struct{})
	go func() {
		defer close(localDone)
		local.Run(localCtx, dataplane.LocalResync, func(err error) { h.log.Warn("keeping the VIP local", "err", err) })
	}()
	daemons, err := startDaemons(o.Dir)
	if err == nil {
		h.log.Info("keepalived and haproxy started; keepalived takes the VIP once haproxy has a ready backend", "logs", o.Dir)
		err = h.serve(ctx, node, out.Handover, daemons, res)
	}
	daemons.stop()
	now := time.Now()
	res.StoppedAt = &now
	stopLocal()
	<-localDone
	if lerr := node.Leave(); lerr != nil {
		err = errors.Join(err, fmt.Errorf("cleaning up: %w", lerr))
	}
	return res, err
}

// prepare reads the inputs and checks them against each other, naming the
// flag or field at fault; the options alone passed Validate.
func prepare(o Options) (*machine, error) {
	in, err := readInputs(o)
	if err != nil {
		return nil, err
	}
	c, nodes := in.c, in.nodes
	h := &machine{o: o, c: c, log: o.Log, masters: in.masters, inPlace: in.inPlace}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	// api-int's own VIPs after the API's: h.vips[0] picks the family the
	// nodes are probed in, and the host yields once none of them is here.
	h.model = in.model
	h.vips = slices.Concat(h.model.API, h.model.APIInternal)
	servers, err := checkServers(o.Servers, h.vips[0])
	if err = errors.Join(err, checkServersAgainst(c, o.Config, o.Servers)); err != nil {
		return nil, err
	}
	iface, err := bootstrapInterface(h.model.Bootstrap, o.Interface)
	if err != nil {
		return nil, err
	}
	h.state = cluster.State{Nodes: nodes, Bootstrap: &cluster.BootstrapHost{Interface: iface, Servers: servers}, BGPPasswords: in.passwords}
	// The answers are read for their status only: the nodes' serving
	// certificates are signed by the cluster's own CA, which this host
	// need not have.
	h.client = &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a readiness probe: only the status code is read
		DisableKeepAlives: true,
	}}
	return h, nil
}

// inputs are a run's cluster file and node list, checked (readInputs),
// and whom the VIP may be yielded to (yieldTargets).
type inputs struct {
	c       *v1alpha1.ClusterVIPs
	model   *cluster.Model
	nodes   []cluster.Node
	masters []cluster.Node
	inPlace string
	// passwords are the sessions' passwords by passwordSecret, from
	// Options.BGPSecrets, and the file each came from.
	passwords, secretFiles map[string]string
}

// readInputs reads the cluster file and the node list and checks what a
// run needs of them wherever it runs: spec.bootstrap named, the nodes
// valid for the cluster, a control-plane node to give the VIP to, and the
// password of each router the host peers with.
func readInputs(o Options) (*inputs, error) {
	c, err := v1alpha1.Load(o.Config)
	if err != nil {
		return nil, err
	}
	if c.Spec.Bootstrap == nil {
		return nil, fmt.Errorf("%s: spec.bootstrap: Required value: the bootstrap host's addresses; the control-plane nodes accept VRRP adverts for the API VIP only from them (docs/bootstrap.md)", o.Config)
	}
	list, err := nodelist.Input{Path: o.Nodes, Config: c, ConfigPath: o.Config, Interface: c.Spec.VRRP.Interface}.Load()
	if err != nil {
		return nil, fmt.Errorf("--nodes: %w", err)
	}
	in := &inputs{c: c, model: cluster.Compile(c), nodes: list.Nodes}
	if in.passwords, in.secretFiles, err = bgpPasswords(c, o.BGPSecrets); err != nil {
		return nil, err
	}
	if errs := v1alpha1.ValidateNodes(c, cluster.Addresses(in.nodes)); len(errs) > 0 {
		return nil, fmt.Errorf("%s with --nodes %s: %w", o.Config, o.Nodes, &v1alpha1.ValidationError{Errors: errs})
	}
	in.masters, in.inPlace = yieldTargets(in.nodes, in.model.Bootstrap)
	switch {
	case len(in.masters) == 0 && in.inPlace != "":
		return nil, fmt.Errorf("--nodes %s: no control-plane node but %s, the node this host reboots into (spec.bootstrap names its address: an in-place bootstrap): nobody to give the API VIP to before the reboot", o.Nodes, in.inPlace)
	case len(in.masters) == 0:
		return nil, fmt.Errorf("--nodes %s: no control-plane node (label node-role.kubernetes.io/master or control-plane): nobody to give the API VIP to", o.Nodes)
	}
	return in, nil
}

// yieldTargets are the control-plane nodes the VIP may be yielded to,
// and the one this host is (inPlace, "" for none): in an in-place
// bootstrap (the agent-based installer's rendezvous host) the bootstrap
// host reboots into a control-plane node whose address spec.bootstrap
// names (validation accepts no other node's). That node's haproxy port is
// this host's own haproxy, and the VIP must be gone from here before the
// reboot: it goes to another one.
func yieldTargets(nodes []cluster.Node, own []netip.Addr) (masters []cluster.Node, inPlace string) {
	for _, n := range nodes {
		if !n.ControlPlane {
			continue
		}
		if slices.ContainsFunc(n.Addresses, func(a netip.Addr) bool { return slices.Contains(own, a) }) {
			inPlace = n.Name
			continue
		}
		masters = append(masters, n)
	}
	return masters, inPlace
}

// bootstrapInterface is the interface holding every spec.bootstrap
// address: keepalived sends from them, so they must be this host's.
func bootstrapInterface(own []netip.Addr, want string) (string, error) {
	iface := want
	for i, a := range own {
		got, err := dataplane.LocalInterface(nil, netip.PrefixFrom(a, a.BitLen()))
		if err != nil {
			return "", fmt.Errorf("spec.bootstrap.addresses[%d]: %s is not an address of this host: run vipctl bootstrap on the host that has it", i, a)
		}
		if iface == "" {
			iface = got
		}
		if got != iface {
			what := "--interface " + iface
			if want == "" {
				what = "interface " + iface + " (spec.bootstrap.addresses[0])"
			}
			return "", fmt.Errorf("spec.bootstrap.addresses[%d]: %s is on interface %s, not on %s: VRRP speaks on one interface", i, a, got, what)
		}
	}
	if msg := v1alpha1.InterfaceNameError(iface); msg != "" {
		// Found on the host rather than given (Validate checked --interface).
		return "", fmt.Errorf("interface %q of spec.bootstrap.addresses: %s", iface, msg)
	}
	return iface, nil
}

// checkServers refuses a --bootstrap-address list haproxy could not use:
// one address per family, one of the API VIP's.
func checkServers(servers []netip.Addr, primary netip.Addr) ([]netip.Addr, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	seen := map[bool]bool{}
	for _, a := range servers {
		if seen[a.Is4()] {
			return nil, fmt.Errorf("--bootstrap-address %s: a second %s address (one per family)", a, family(a))
		}
		seen[a.Is4()] = true
	}
	if !seen[primary.Is4()] {
		return nil, fmt.Errorf("--bootstrap-address: no %s address; haproxy reaches the bootstrap machine in the family of the API VIP %s", family(primary), primary)
	}
	return servers, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// serve waits for the VIP, then for the control-plane nodes to answer for
// YieldAfter, yields, and keeps serving for Grace after the VIP left.
func (h *machine) serve(ctx context.Context, node *runtimecfg.Node, hand onnode.Handover, d *daemons, res *Result) error {
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return h.stopEarly(node, hand, res)
		case err := <-d.exited:
			return err
		case <-tick.C:
		}
		if res.ServedAt == nil && h.holds() {
			now := time.Now()
			res.ServedAt = &now
			h.log.Info("holding the API VIP", "vips", res.VIPs, "interface", res.Interface)
		}
		up := h.answering(ctx)
		if len(up) == 0 {
			if !since.IsZero() {
				h.log.Info("the control-plane nodes stopped answering; keeping the VIP")
			}
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
			h.log.Info("control-plane nodes answer through their haproxy", "nodes", up, "yield after", h.o.YieldAfter)
		}
		if time.Since(since) < h.o.YieldAfter {
			continue
		}
		if !h.holds() {
			// Never held (its haproxy never had a ready backend) or
			// lost: there is nothing to hand over.
			h.log.Warn("the control-plane nodes answer and this host does not hold the VIP: stopping")
			return nil
		}
		left, err := h.yield(ctx, node, hand, res)
		if err != nil {
			return err
		}
		if left {
			return h.linger(ctx, d)
		}
		since = time.Time{}
	}
}

// stopEarly is serve's end when the run is stopped: the VIP goes to the
// control-plane nodes make-before-break when they answer, and is given up
// at once (keepalived's priority-0 advert) when nobody can take it.
func (h *machine) stopEarly(node *runtimecfg.Node, hand onnode.Handover, res *Result) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.yieldTimeout()+probeTimeout)
	defer cancel()
	if !h.holds() || len(h.answering(ctx)) == 0 {
		h.log.Warn("stopped while no control-plane node answers: the API VIP is down until one does")
		return nil
	}
	h.log.Info("stopped: giving the VIP to the control-plane nodes first")
	_, err := h.yield(ctx, node, hand, res)
	return err
}

// yieldTimeout is how long a control-plane node may take to preempt a
// drained bootstrap host: its master-down interval is about three adverts.
func (h *machine) yieldTimeout() time.Duration {
	return max(10*h.c.Spec.VRRP.Advert(), 5*time.Second)
}

// yield drains this host (priority 1, the VIP kept local) and waits for a
// control-plane node to take the VIP. When none does in time, it ends the
// drain and the host keeps the VIP; left says which.
func (h *machine) yield(ctx context.Context, node *runtimecfg.Node, hand onnode.Handover, res *Result) (left bool, err error) {
	start := time.Now()
	if err := node.Drain(hand); err != nil {
		return false, err
	}
	h.log.Info("yielding: priority 1, a control-plane node takes the VIP while this host still answers")
	deadline := start.Add(h.yieldTimeout())
	for h.holds() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.log.Warn("no control-plane node took the VIP; keeping it", "waited", time.Since(start).Round(time.Millisecond))
			if err := node.Undrain(); err != nil {
				return false, err
			}
			return false, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	gone := time.Now()
	res.YieldedAt, res.LeftAt = &start, &gone
	res.HandoverMillis = gone.Sub(start).Milliseconds()
	h.log.Info("a control-plane node holds the VIP", "after", gone.Sub(start).Round(time.Millisecond))
	return true, nil
}

// linger keeps haproxy serving the connections it accepted for Grace.
func (h *machine) linger(ctx context.Context, d *daemons) error {
	h.log.Info("serving the connections accepted here until they finish", "grace", h.o.Grace)
	select {
	case <-time.After(h.o.Grace):
	case <-ctx.Done():
	case err := <-d.exited:
		return err
	}
	return nil
}

// holds tells whether an API VIP is on this host.
func (h *machine) holds() bool {
	addrs, err := dataplane.LinkAddresses()
	if err != nil {
		h.log.Warn("listing addresses", "err", err)
		return false
	}
	return slices.ContainsFunc(h.vips, func(v netip.Addr) bool { return slices.Contains(addrs, v) })
}

// answering lists the control-plane nodes whose haproxy serves what the
// VIP serves: a ready kube-apiserver behind its API port and, with
// spec.api.internalPort, a machine config server behind its internal one.
//
// In place, each node's haproxy also balances onto this host's bootstrap
// kube-apiserver (as the node this host reboots into), so it answers as
// soon as it runs: the node counts only once its own kube-apiserver is
// ready too, so that the VIP leads to one that outlives this host's
// reboot. Its machine config server is not waited for: it comes with
// the Machine Config Operator, after the bootstrap completes, and the
// installer may reboot this host before it does.
func (h *machine) answering(ctx context.Context) []string {
	s := &h.c.Spec.API
	primary := h.vips[0]
	var mu sync.Mutex
	var up []string
	var wg sync.WaitGroup
	for _, n := range h.masters {
		i := slices.IndexFunc(n.Addresses, func(a netip.Addr) bool { return a.Is4() == primary.Is4() })
		if i < 0 {
			continue
		}
		addr := n.Addresses[i]
		wg.Go(func() {
			if !h.ok(ctx, addr, s.LoadBalancerPort, "/readyz") {
				return
			}
			if s.InternalPort != 0 && !h.ok(ctx, addr, s.InternalLoadBalancerPort, "/healthz") {
				return
			}
			if h.inPlace != "" && !h.ok(ctx, addr, s.Port, "/readyz") {
				return
			}
			mu.Lock()
			up = append(up, n.Name)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(up)
	return up
}

// ok tells whether https://addr:port/path answers 200.
func (h *machine) ok(ctx context.Context, addr netip.Addr, port int32, path string) bool {
	url := "https://" + net.JoinHostPort(addr.String(), strconv.Itoa(int(port))) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
