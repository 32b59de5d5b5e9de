package runtimecfg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/render"
)

// OnceOptions are the inputs of the init container: everything comes from
// files the MachineConfig laid down, so it works before any API server
// answers and the API VIP can come up first.
type OnceOptions struct {
	Target
	// Config is the ClusterVIPs file (render.ClusterConfigPath).
	Config string
	// BootstrapNodes is the NodeList shipped at render time
	// (render.BootstrapNodesPath).
	BootstrapNodes string
	// NodeName is this node.
	NodeName string
	// KeepDrain leaves a drain as it is. Only the keepalived pod's start
	// ends one; the haproxy pod, which renders the same files, keeps it:
	// a haproxy pod restarting during a drain must not drop the local
	// routes that keep the node's ingress and Service connections served.
	KeepDrain bool
}

// Once renders and applies this node's files from the static inputs and
// creates the run files keepalived tracks, then returns.
func Once(ctx context.Context, o OnceOptions) (Result, error) {
	c, err := v1alpha1.Load(o.Config)
	if err != nil {
		return Result{}, err
	}
	if err := InitRunFiles(o.Target, c); err != nil {
		return Result{}, err
	}
	// A new keepalived pod starts undrained, whatever the last one's
	// preStop left.
	if !o.KeepDrain {
		if err := Undrain(o.Target); err != nil {
			return Result{}, err
		}
	}
	nodes, err := cluster.LoadNodeList(o.BootstrapNodes, c.Spec.VRRP.Interface)
	if errors.Is(err, fs.ErrNotExist) {
		// Rendered without --nodes: nothing to render peers from until the
		// sidecar reads the API. keepalived must still start, so it gets
		// a config without instances (unless one is there already).
		res, werr := placeholder(ctx, o.Target, o.NodeName)
		if werr != nil {
			return res, werr
		}
		return res, fmt.Errorf("%w: %s (render with --nodes so the API VIP comes up before the API does)", ErrNoBootstrapNodes, o.BootstrapNodes)
	}
	if err != nil {
		return Result{}, fmt.Errorf("bootstrap nodes: %w", err)
	}
	out, err := NewNode(o.Target, o.NodeName, nil).Reconcile(ctx, Input{Config: c, State: cluster.State{Nodes: nodes}})
	return out.Result, errors.Join(err, out.HandoverErr)
}

// ErrNoBootstrapNodes says Once found no bootstrap node list: keepalived
// got a config without instances, and the sidecar renders the real one
// from the API.
var ErrNoBootstrapNodes = errors.New("no bootstrap node list")

// placeholder writes a keepalived.conf without instances when there is
// none yet, so keepalived starts and the sidecar can reload it.
func placeholder(ctx context.Context, t Target, node string) (Result, error) {
	if _, err := os.Stat(t.path(render.KeepalivedConfPath)); err == nil {
		return Result{}, nil
	}
	data := fmt.Appendf(nil, "# Written by vipctl runtimecfg --once for node %s: no bootstrap node list,\n# so no VRRP instance until the sidecar renders from the API.\nglobal_defs {\n    router_id %s\n}\n", node, strings.ReplaceAll(node, "-", "_"))
	return Apply(ctx, t, []render.File{{Path: render.KeepalivedConfPath, Mode: 0o644, Data: data}})
}

// InitRunFiles creates the track files keepalived reads, without
// overwriting what a running sidecar already wrote: no drain, and the
// default IngressController counted ready (its VIP must work before the API
// does; its router health check still guards it) while other controllers
// wait for the sidecar to see their routers.
func InitRunFiles(t Target, c *v1alpha1.ClusterVIPs) error {
	if err := os.MkdirAll(t.path(render.RunDir), 0o755); err != nil {
		return err
	}
	init := map[string]string{render.DrainFile: "0"}
	for _, in := range c.Spec.Ingress {
		v := "1"
		if in.Name == v1alpha1.DefaultIngressController {
			v = "0"
		}
		init[render.IngressStatusFile(in.Name)] = v
	}
	for p, v := range init {
		f, err := os.OpenFile(t.path(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, werr := f.WriteString(v + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	return nil
}

// SetIngressReady records whether a ready router pod of the controller
// runs on this node.
func SetIngressReady(t Target, controller string, ready bool) error {
	// The file holds 0 for ready: keepalived treats non-zero as a fault.
	return writeRunFile(t, render.IngressStatusFile(controller), !ready)
}

// PruneLocalStatus removes the status files of Local Services that are no
// longer in keep. Call it only once the keepalived.conf that tracked them
// has been replaced: until then keepalived still reads them.
func PruneLocalStatus(t Target, keep []cluster.LocalService) error {
	want := make(map[string]bool, len(keep))
	for _, ls := range keep {
		want[t.path(render.LocalServiceStatusFile(ls.Name))] = true
	}
	found, err := filepath.Glob(t.path(render.LocalServiceStatusFile("*")))
	if err != nil {
		return err
	}
	for _, f := range found {
		if !want[f] {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func writeRunFile(t Target, path string, one bool) error {
	v := "0\n"
	if one {
		v = "1\n"
	}
	_, err := writeIfChanged(t.path(path), render.File{Path: path, Mode: 0o644, Data: []byte(v)})
	return err
}
