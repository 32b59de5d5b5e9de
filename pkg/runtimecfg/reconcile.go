package runtimecfg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// Node is one node being kept in line: its handle (files, network
// namespace), its name, and what outlives a single pass, the handover
// tables' writer and the local routes of the VIPs it holds. The init
// container (--once), the sidecar and the lab all go through Reconcile.
type Node struct {
	host.Target
	Name string
	// Local keeps the VIPs held here local across handovers; nil where
	// nothing runs it (--once exits; the sidecar that follows runs it).
	Local *dataplane.LocalVIPs
	// handover and takeover rewrite the tables and routes with only the
	// difference.
	handover *dataplane.HandoverWriter
	takeover *dataplane.TakeoverWriter
	// redirected is the API table's input last written, and when: a sync
	// runs for every Service added, and writing the same table again is
	// an nftables transaction each time. redirectedAt moves only when the
	// table written redirects (resetBypassing follows it).
	redirected   string
	writtenAt    time.Time
	redirectedAt time.Time
	// bypassCheckedAt is the redirectedAt of the table after which
	// resetBypassing last ran without an error.
	bypassCheckedAt time.Time
	// AwaitHaproxy writes the API redirects only once haproxy accepts
	// connections on the API's load-balancer port (the sidecar and a real
	// node's init container): before that a redirect turns the node's own
	// clients of the API VIP (the kubelet) to a closed port, refused,
	// where without it they reach the VIP's holder. The node holds no
	// API VIP meanwhile: haproxy's check puts its instances in FAULT.
	// haproxySeen records that it did accept once; from then on the
	// redirects stay, as they always did.
	AwaitHaproxy bool
	haproxySeen  bool
}

// NewNode prepares a node for Reconcile.
func NewNode(t host.Target, name string, local *dataplane.LocalVIPs) *Node {
	return &Node{Target: t, Name: name, Local: local, handover: dataplane.NewHandoverWriter(t, dataplane.HandoverGrace),
		takeover: dataplane.NewTakeoverWriter(t)}
}

// Input is what a node is brought in line with.
type Input struct {
	// Model is the effective config, compiled once for the whole pass.
	Model *cluster.Model
	State cluster.State
	// IngressReady says, per IngressController, whether a ready router pod
	// runs on this node. nil leaves the status files as they are (--once:
	// InitRunFiles wrote them).
	IngressReady map[string]bool
	// From names where Config and State came from, for --once's report;
	// Warnings are what it ignored on the way (BootInput).
	From     string
	Warnings []string
	// ReadAt is when State was read (zero: now): Service addresses the
	// sidecar added since stay (dataplane.LocalVIPs.SetHandoverAsOf).
	ReadAt time.Time
	// HoldBack renders this node at the lowest priority (render.WithHeldBack):
	// --once before the pod's sidecar has synced.
	HoldBack bool
	// Drained says the node's Node asks to be drained (`vipctl drain`):
	// its BGP announcements become backups (render.WithDrained).
	Drained bool
	// ProxyPending names the Local Services (namespace/name) with a ready
	// endpoint on this node that the node's service proxy does not
	// deliver to yet (its health check node port counts no local
	// endpoint): the node holds their VIPs only at priority 1, as while
	// its endpoints drain, so it takes none from a peer whose proxy
	// delivers, and announces none of their bgp routes
	// (render.WithProxyPending).
	ProxyPending map[string]bool
}

// Outcome is what a Reconcile did and what the node's state is now.
type Outcome struct {
	Result
	NodeState
	// HandoverErr says the handover tables or the IPv6 takeover routes
	// could not be written. The config is in place; only hitless moves are
	// at stake, so it is reported apart from the error that means "last
	// good config kept".
	HandoverErr error
	// Bypassing is how many of the node's own connections to the API VIP
	// that bypassed the redirect were reset (dataplane.ResetBypassing),
	// BypassErr why some could not be. Like HandoverErr, it is reported
	// apart: the config is in place.
	Bypassing int
	BypassErr error
	// RedirectWaiting says the API redirects wait for haproxy to accept
	// connections (Node.AwaitHaproxy): a Reconcile soon writes them.
	RedirectWaiting bool
}

// Reconcile brings the node into line with in, in the one order that is
// safe: the track files keepalived reads; the render; the real daemons'
// judgement, atomic writes and reloads (Apply: keepalived, haproxy and,
// with bgp pools, FRR's frr.conf through vtysh -C and frr-reload.py); the status files no config
// reads any more; then the local routes' keeper is told (it also adds and announces the Service
// addresses of announce: sidecar pools, on its own goroutine, so a new Service's address does not
// wait for what follows); the API redirect and the internal API's guard; the handover tables and
// the IPv6 takeover routes.
// An error means the node kept its last good config; its Reason is one of
// the sidecar's failure labels.
func (n *Node) Reconcile(ctx context.Context, in Input) (Outcome, error) {
	var out Outcome
	for name, ready := range in.IngressReady {
		if err := SetIngressReady(n.Target, name, ready); err != nil {
			return out, &StepError{"write", err}
		}
	}
	// Only the Local Services keepalived tracks have status files; a bgp
	// pool's are announced or not by frr.conf instead.
	vrrpLocal := in.Model.VRRPLocalServices(in.State)
	for _, ls := range vrrpLocal {
		if err := n.WriteTrackValue(onnode.LocalServiceStatusFile(ls.Name), localStatus(ls, n.Name, in.ProxyPending, in.HoldBack)); err != nil {
			return out, &StepError{"write", err}
		}
	}
	d, err := n.Desired(in)
	if err != nil {
		return out, &StepError{"render", err}
	}
	out.NodeState = d
	out.Result, err = Apply(ctx, n.Target, d.Files)
	if err != nil {
		return out, &StepError{"apply", err}
	}
	if err := PruneLocalStatus(n.Target, vrrpLocal); err != nil {
		return out, &StepError{"write", err}
	}
	if n.Local != nil {
		n.Local.SetHandoverAsOf(d.Handover, in.ReadAt)
		n.Local.Kick()
	}
	if out.RedirectWaiting, err = n.redirect(in.Model.Config, d); err != nil {
		return out, &StepError{"redirect", err}
	}
	out.Bypassing, out.BypassErr = n.resetBypassing(d)
	out.HandoverErr = errors.Join(n.handover.Apply(d.Handover), n.takeover.Apply(d.Handover))
	return out, nil
}

// localStatus is what a Local Service's status file says on node: as the
// EndpointSlices say (render.LocalServiceStatus), but a ready endpoint the
// node's service proxy does not deliver to yet counts as draining, and a
// node held back (not synced since its keepalived pod started) has none.
//
// Held back, the node renders from its last-good view, whose endpoints
// may be long gone: a rebooted node runs no workload pod before its
// kubelet syncs with the API, and its peers, which do, no longer count it
// a member of the Service's instance, so they send it no adverts (and
// drop its own: check_unicast_src). Rendered as a member at priority 1,
// it heard nobody and took the VIP after Master_Down while a peer held
// it, and the clients that followed its gratuitous ARP lost 8 s: the
// cluster lab's rolling upgrade, 2026-11-29, all four Local addresses
// at once. In FAULT it takes nothing; its first sync renders the truth.
func localStatus(ls cluster.LocalService, node string, proxyPending map[string]bool, heldBack bool) int {
	if heldBack {
		return onnode.LocalNone
	}
	v := render.LocalServiceStatus(ls, node)
	if v == onnode.LocalReady && proxyPending[ls.Name] {
		return onnode.LocalDraining
	}
	return v
}

// redirect writes the API redirects and guard (dataplane.ApplyRedirects)
// of a control-plane node (one with haproxy.cfg) unless the same were
// written less than LocalResync ago. With AwaitHaproxy, until haproxy
// has accepted a connection it writes the guard alone, and leaves a
// table that already redirects (a restarted sidecar's) as it is; waiting
// says so.
func (n *Node) redirect(c *v1alpha1.ClusterVIPs, d NodeState) (waiting bool, err error) {
	if !hasHaproxy(d.Files) {
		return false, nil
	}
	redirects := d.Redirects
	if n.AwaitHaproxy && !n.haproxySeen {
		n.haproxySeen = dataplane.Accepting(n.Target, uint16(c.Spec.API.LoadBalancerPort))
	}
	if n.AwaitHaproxy && !n.haproxySeen {
		has, err := dataplane.HasRedirects(n.Target)
		if err != nil || has {
			return true, err
		}
		redirects, waiting = nil, true
	}
	var guard onnode.InternalGuard
	if d.Guard != nil {
		guard = *d.Guard
	}
	key := fmt.Sprintf("%v %t %+v", redirects, d.Guard != nil, guard)
	if key == n.redirected && time.Since(n.writtenAt) < dataplane.LocalResync {
		return waiting, nil
	}
	n.redirected = ""
	if err := dataplane.ApplyRedirects(n.Target, redirects, d.Guard); err != nil {
		return waiting, err
	}
	n.redirected, n.writtenAt = key, time.Now()
	if !waiting {
		// Only a table that redirects makes connections that bypass it
		// worth a reset (resetBypassing).
		n.redirectedAt = time.Now()
	}
	return waiting, nil
}

// resetBypassing resets, on a control-plane node (one with the API
// redirect), the node's own connections to the API VIP that the redirect
// did not turn to haproxy (dataplane.ResetBypassing): opened before the
// table, they break silently once this node takes the VIP. Once the
// table has been written there are no new ones, so it runs only when the
// table was written (n.redirectedAt moved), not on every sync.
func (n *Node) resetBypassing(d NodeState) (int, error) {
	if n.redirectedAt.Equal(n.bypassCheckedAt) || !hasHaproxy(d.Files) {
		return 0, nil
	}
	reset, err := dataplane.ResetBypassing(n.Target, d.Redirects)
	if err == nil {
		n.bypassCheckedAt = n.redirectedAt
	}
	return reset, err
}

// hasHaproxy tells whether files include haproxy.cfg: a control-plane
// node's, the one with the API redirect.
func hasHaproxy(files []onnode.File) bool {
	return slices.ContainsFunc(files, func(f onnode.File) bool { return f.Path == onnode.HaproxyConfPath })
}

// Desired is what Reconcile brings the node in line with, rendered from
// in without touching the node.
func (n *Node) Desired(in Input) (NodeState, error) {
	var extra []render.PlanOption
	if in.Drained {
		extra = append(extra, render.WithDrained(n.Name))
	}
	if in.HoldBack {
		extra = append(extra, render.WithHeldBack(n.Name))
	}
	switch {
	case in.HoldBack:
		// Its bgp routes of Local Services wait for the first sync too
		// (localStatus): none is announced before it.
		all := map[string]bool{}
		for _, ls := range in.State.LocalServices {
			all[ls.Name] = true
		}
		extra = append(extra, render.WithProxyPending(n.Name, all))
	case len(in.ProxyPending) > 0:
		extra = append(extra, render.WithProxyPending(n.Name, in.ProxyPending))
	}
	st := in.State
	if in.Model.Config.HasOwnInterfaces() {
		// Only this node's own interfaces are known for sure; a pool on
		// one it lacks leaves it out here instead of failing
		// keepalived's config test for the whole node.
		names, err := dataplane.LinkNames(n.Target)
		if err != nil {
			return NodeState{}, err
		}
		st.Nodes = slices.Clone(st.Nodes)
		for i := range st.Nodes {
			if st.Nodes[i].Name == n.Name {
				st.Nodes[i].Interfaces = names
			}
		}
	}
	return DesiredNode(in.Model, st, n.Name, n.Root, extra...)
}

// NodeState is everything the sidecar keeps true on one node.
type NodeState struct {
	Files []onnode.File
	// Handover feeds the handover table and a drain.
	Handover onnode.Handover
	// Lonely tells which instances were left out for lack of a peer.
	Lonely []string
	// Unannounced are the Local Services no VRRP ID was left for: their
	// VIPs are announced by no node until IDs free up.
	Unannounced []cluster.LocalService
	// Announced are the bgp pool routes this node's frr.conf announces.
	Announced []onnode.Announced
	// Guard closes the internal API to all but the cluster's hosts (nil:
	// the config serves none); written where haproxy runs.
	Guard *onnode.InternalGuard
	// Redirects are the node's API redirects to haproxy (none where
	// haproxy does not run).
	Redirects []onnode.PortRedirect
	// MissingInterfaces are the pools and IngressControllers this node
	// holds no VIP of because it lacks the interface they live on.
	MissingInterfaces []onnode.MissingInterface
	// Members are the cluster's own VRRP routers by ID, for telling a
	// foreign router's adverts from theirs.
	Members vrid.Members
}

// DesiredNode renders one node's files and the rest of its state from a
// config and a cluster state. An instance with a single eligible node is
// left out (see NodeRender.Lonely) rather than failing the node's whole config.
func DesiredNode(m *cluster.Model, st cluster.State, node, root string, opts ...render.PlanOption) (NodeState, error) {
	vrrpLocal := m.VRRPLocalServices(st)
	extra := make([]v1alpha1.InstanceKey, 0, len(vrrpLocal))
	for _, ls := range vrrpLocal {
		extra = append(extra, v1alpha1.ServiceKey(ls.Name))
	}
	// The Services come oldest first (cluster.SortByAge), so a new one
	// never takes an ID from one that has it.
	ids, unassigned, err := vrid.ForClusterAnd(m.Config, extra)
	if err != nil {
		return NodeState{}, err
	}
	var unannounced []cluster.LocalService
	if len(unassigned) > 0 {
		placed := make([]cluster.LocalService, 0, len(st.LocalServices))
		for _, ls := range st.LocalServices {
			if _, ok := ids[v1alpha1.ServiceKey(ls.Name)]; ok || !slices.ContainsFunc(vrrpLocal, func(v cluster.LocalService) bool { return v.Name == ls.Name }) {
				placed = append(placed, ls)
			} else {
				unannounced = append(unannounced, ls)
			}
		}
		st.LocalServices = placed
	}
	plan, err := render.NewPlan(m, ids, st, append([]render.PlanOption{render.WithRoot(root), render.WithLonelySkipped()}, opts...)...)
	if err != nil {
		return NodeState{}, err
	}
	r, err := plan.Node(node)
	if err != nil {
		return NodeState{}, err
	}
	h, err := plan.Handover(node)
	var guard *onnode.InternalGuard
	if g, ok := plan.InternalGuard(); ok {
		guard = &g
	}
	var missing []onnode.MissingInterface
	for _, m := range plan.MissingInterfaces() {
		if m.Node == node {
			missing = append(missing, m)
		}
	}
	return NodeState{Files: r.Files, Handover: h, Lonely: r.Lonely, Unannounced: unannounced, Announced: r.Announced, Guard: guard, Redirects: plan.Redirects(node), MissingInterfaces: missing, Members: plan.VRRPMembers()}, err
}

// StepError is a failed step of a sync, labelled for the sidecar's
// failure metric: Reconcile's steps (write, render, apply, redirect) and
// the sidecar's own (config).
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Reason is the failure label of err: its StepError's step, or "other".
func Reason(err error) string {
	var se *StepError
	if errors.As(err, &se) {
		return se.Step
	}
	return "other"
}
