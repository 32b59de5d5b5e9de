package runtimecfg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// OnceOptions are the inputs of the init container: everything comes from
// files the MachineConfig laid down, so it works before any API server
// answers and the API VIP can come up first.
type OnceOptions struct {
	host.Target
	// Config is the ClusterVIPs file (onnode.ClusterConfigPath).
	Config string
	// BootstrapNodes is the NodeList shipped at render time
	// (onnode.BootstrapNodesPath).
	BootstrapNodes string
	// NodeName is this node.
	NodeName string
	// KeepDrain leaves a drain, and the synced mark, as they are. Only
	// the keepalived pod's start (its init container) ends a drain and
	// holds the node back until its sidecar syncs; the haproxy pod, which
	// renders the same files, keeps them (a haproxy pod restarting during
	// a drain must not drop the local routes that keep the node's ingress
	// and Service connections served), and so does the sidecar container,
	// which also starts again after its own crash.
	KeepDrain bool
	// AwaitHaproxy holds the API redirects back until haproxy accepts
	// connections (Node.AwaitHaproxy): a real node's init container and
	// sidecar, where the pods start after a boot.
	AwaitHaproxy bool
}

// Once renders and applies this node's files from what the node has on
// disk and creates the run files keepalived tracks, then returns. It starts
// from the newer of the bootstrap node list and the sidecar's last-good
// view (LastGood): a restarted pod comes back with the Service addresses it
// served, and a node that joined after render renders from the cluster as
// a peer last saw it... once it has synced once. A node with nothing to
// render from gets a keepalived.conf without instances and an error that
// wraps ErrNoInstances: the pod must start anyway (never a crash loop), and
// the sidecar renders the real config once the API answers.
func Once(ctx context.Context, o OnceOptions) (OnceResult, error) {
	c, unknown, err := v1alpha1.LoadStored(o.Config)
	if err != nil {
		return OnceResult{}, err
	}
	if err := InitRunFiles(o.Target, c); err != nil {
		return OnceResult{}, err
	}
	// A new keepalived pod starts undrained, whatever the last one's
	// preStop left, and unsynced: held back until its sidecar has seen
	// the cluster.
	if !o.KeepDrain {
		if err := dataplane.Undrain(o.Target); err != nil {
			return OnceResult{}, err
		}
		if err := os.Remove(o.Path(onnode.SyncedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return OnceResult{}, err
		}
	}
	in, err := BootInput(o, c)
	res := OnceResult{From: in.From, Warnings: in.Warnings, Nodes: in.State.Nodes}
	if len(unknown) > 0 {
		res.Warnings = append([]string{o.Config + ": " + unknown.String()}, res.Warnings...)
	}
	if errors.Is(err, ErrNoInstances) {
		var werr error
		res.Result, werr = placeholder(ctx, o.Target, o.NodeName, err)
		return res, errors.Join(werr, err)
	}
	if err != nil {
		return res, err
	}
	n := NewNode(o.Target, o.NodeName, nil)
	n.AwaitHaproxy = o.AwaitHaproxy
	out, err := n.Reconcile(ctx, in)
	res.Result = out.Result
	return res, errors.Join(err, out.HandoverErr)
}

// OnceResult is what Once changed and what it rendered from.
type OnceResult struct {
	Result
	// From is the file the node list came from (the bootstrap list or
	// the last-good view); empty when there was none.
	From string
	// Warnings name what was ignored on the way.
	Warnings []string
	// Nodes are the nodes it knew of: the sidecar's API fallbacks
	// (WithAPIFallback) come from them.
	Nodes []cluster.Node
}

// BootInput chooses what --once renders from. The last-good view wins
// when it is at least as new as the bootstrap node list; a newer bootstrap
// list (a MachineConfig that `vipctl update` rewrote since) gives the
// control-plane nodes (cluster.WithBootstrapNodes), the last-good view
// still the other nodes and the Service addresses, routers and day-2
// pools it alone knows. The static file stays authoritative for the
// rest of the config. Unreadable last-good data is ignored (it must never
// keep keepalived from starting) and Warnings say so.
func BootInput(o OnceOptions, static *v1alpha1.ClusterVIPs) (Input, error) {
	var in Input
	cfg := static
	// The haproxy pod's init container and a restarted sidecar run this
	// too: once the keepalived pod's sidecar has synced they must not
	// lower the running node's priorities.
	if _, err := os.Stat(o.Path(onnode.SyncedFile)); err != nil {
		in.HoldBack = true
	}
	nodes, nerr := cluster.LoadNodeList(o.BootstrapNodes, static.Spec.VRRP.Interface)
	if nerr != nil && !errors.Is(nerr, fs.ErrNotExist) {
		return in, fmt.Errorf("bootstrap nodes: %w", nerr)
	}
	lg, lgConfig, saved, lerr := LoadLastGood(o.Target)
	if lerr == nil && lg.Node != o.NodeName {
		lerr = fmt.Errorf("%s: written by node %s, not %s", onnode.LastGoodPath, lg.Node, o.NodeName)
	}
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		in.Warnings = append(in.Warnings, fmt.Sprintf("ignoring the last-good view: %v", lerr))
	}
	if lerr == nil {
		if len(lg.Unknown) > 0 {
			in.Warnings = append(in.Warnings, onnode.LastGoodPath+": config: "+lg.Unknown.String())
		}
		if eff, _, err := cluster.Effective(static, lgConfig); err == nil {
			cfg = eff
		} else {
			in.Warnings = append(in.Warnings, fmt.Sprintf("ignoring the last-good view's service pools: %v", err))
		}
		in.State = lg.State
		// Which apiservers served then says nothing about a cold start:
		// haproxy balances over every control-plane node and its own
		// health checks decide.
		in.State.APIServers = nil
		in.From = onnode.LastGoodPath
	}
	in.Model = cluster.Compile(cfg)
	if nerr == nil {
		if fi, err := os.Stat(o.BootstrapNodes); lerr != nil || (err == nil && fi.ModTime().After(saved)) {
			in.State.Nodes = cluster.WithBootstrapNodes(in.State.Nodes, nodes)
			in.From = o.BootstrapNodes
		}
	}
	if in.From == "" {
		return in, fmt.Errorf("%w: %w: %s (the control-plane MachineConfig ships one when rendered with --nodes, so a control-plane node brings the API VIP up before the API answers; a worker renders from the API)", ErrNoInstances, ErrNoBootstrapNodes, o.BootstrapNodes)
	}
	if !slices.ContainsFunc(in.State.Nodes, func(n cluster.Node) bool { return n.Name == o.NodeName }) {
		names := make([]string, 0, len(in.State.Nodes))
		for _, n := range in.State.Nodes {
			names = append(names, n.Name)
		}
		return in, fmt.Errorf("%w: %w: %s; its sidecar renders it from the API, and keeps a last-good view from then on", ErrNoInstances, ErrNodeNotListed, cluster.NotListed(o.NodeName, in.From, names))
	}
	return in, nil
}

// ErrNoInstances says Once had nothing this node can render from:
// keepalived got a config without instances (so it starts and holds
// nothing, taking no VIP from anyone), and the sidecar renders the real
// one from the API.
var ErrNoInstances = errors.New("started without VRRP instances")

// ErrNoBootstrapNodes says Once found neither a bootstrap node list nor a
// last-good view.
var ErrNoBootstrapNodes = errors.New("no bootstrap node list")

// ErrNodeNotListed says this node is in neither the bootstrap node list
// nor the last-good view: it joined the cluster after both were written,
// or the list names it otherwise (cluster.NotListed says which).
var ErrNodeNotListed = errors.New("node not in the node list")

// placeholder writes a keepalived.conf without instances when there is
// none yet, so keepalived starts and the sidecar can reload it.
func placeholder(ctx context.Context, t host.Target, node string, why error) (Result, error) {
	if _, err := os.Stat(t.Path(onnode.KeepalivedConfPath)); err == nil {
		return Result{}, nil
	}
	reason := strings.ReplaceAll(why.Error(), "\n", " ")
	data := fmt.Appendf(nil, "# Written by vipctl runtimecfg --once for node %s: %s.\n# No VRRP instance until the sidecar renders from the API.\nglobal_defs {\n    router_id %s\n}\n", node, reason, strings.ReplaceAll(node, "-", "_"))
	return Apply(ctx, t, []onnode.File{{Path: onnode.KeepalivedConfPath, Mode: 0o644, Data: data}})
}
