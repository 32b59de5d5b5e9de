// Package runtimecfg brings one node in line with a config and a cluster
// state: Node.Reconcile is the one sequence (track files, render, the real
// daemons' judgement, atomic writes, reloads, then the data plane's API
// redirect, handover tables and takeover routes) that the init container
// (Once), the sidecar (pkg/sidecar) and the lab all call. Its rule: a
// config the daemons reject is never written, and on any failure the files
// on disk stay as they were (the last good config). It watches nothing: its
// input comes from files (Once: the static config, the bootstrap node list,
// the last-good view) or from its caller.
package runtimecfg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// check runs the daemons' config tests where the node's interfaces are.
func check(t host.Target) configcheck.Options {
	return configcheck.Options{Netns: t.Netns, Keepalived: t.Keepalived, Haproxy: t.Haproxy, Vtysh: t.Vtysh}
}

// daemon is one of the node's daemons as Apply meets it: the config file
// it reads, the real daemon's judgement of a candidate (its package's
// Check), and the running daemon told to apply it (its package's Reload:
// whether it was running to be told). Adding a daemon is its package and
// a line in daemons.
type daemon struct {
	name   string
	conf   string
	check  func(ctx context.Context, conf []byte, o configcheck.Options) error
	reload func(ctx context.Context, t host.Target) (bool, error)
}

var daemons = []daemon{
	{"keepalived", onnode.KeepalivedConfPath, keepalived.Check, func(_ context.Context, t host.Target) (bool, error) { return keepalived.Reload(t) }},
	{"haproxy", onnode.HaproxyConfPath, haproxy.Check, haproxy.Reload},
	{frr.Name, onnode.FRRConfPath, frr.Check, frr.Reload},
}

// daemonOf is the daemon that reads the config at path, if any.
func daemonOf(path string) (daemon, bool) {
	for _, d := range daemons {
		if d.conf == path {
			return d, true
		}
	}
	return daemon{}, false
}

// Result tells what an Apply changed.
type Result struct {
	// Written lists the node paths whose content changed.
	Written []string
	// Reloaded lists the daemons that were told to reload.
	Reloaded []string
}

// Apply makes the node's files equal to files. Unchanged files are not
// touched and nothing is reloaded for them. Scripts are laid down first
// (the configs name them), then keepalived.conf and haproxy.cfg are judged
// by the real daemons before either replaces the running one; a config
// the daemon rejects is never written.
func Apply(ctx context.Context, t host.Target, files []onnode.File) (Result, error) {
	var res Result
	var configs []onnode.File
	for _, f := range files {
		if _, ok := daemonOf(f.Path); ok {
			configs = append(configs, f)
			continue
		}
		changed, err := t.WriteFile(f.Path, f.Data, f.Mode)
		if err != nil {
			return res, err
		}
		if changed {
			res.Written = append(res.Written, f.Path)
		}
	}
	var changed []onnode.File
	// replaced is what each changed config held before: it goes back
	// when the daemon fails to take the new one.
	replaced := map[string][]byte{}
	for _, f := range configs {
		cur, err := os.ReadFile(t.Path(f.Path))
		if err == nil && bytes.Equal(cur, f.Data) {
			continue
		}
		if err == nil {
			replaced[f.Path] = cur
		}
		// The configs were rendered with t.Root already in their paths, so
		// the scripts they name are checked where they stand.
		d, _ := daemonOf(f.Path)
		if err := d.check(ctx, f.Data, check(t)); err != nil {
			return res, fmt.Errorf("keeping the last good %s: %w", f.Path, err)
		}
		changed = append(changed, f)
	}
	// keepalived and haproxy first: their reloads take milliseconds,
	// frr-reload.py seconds (3-5 s on a loaded node), and a VIP that
	// moves (a Local Service's new endpoint, a node's drain) must not
	// wait for FRR. FRR first only when a pool moves from vrrp to bgp:
	// the routers learn its /32s while keepalived still holds the
	// addresses, and only then does keepalived let them go (make before
	// break). The other way round VRRP needs its master-down interval
	// anyway, which no order saves.
	frrFirst := false
	for _, f := range changed {
		if f.Path == onnode.FRRConfPath {
			frrFirst = frrTakesOver(replaced[onnode.KeepalivedConfPath], f.Data)
		}
	}
	rank := func(f onnode.File) int {
		if (f.Path == onnode.FRRConfPath) == frrFirst {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(changed, func(a, b onnode.File) int { return rank(a) - rank(b) })
	for _, f := range changed {
		if _, err := t.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			return res, err
		}
		res.Written = append(res.Written, f.Path)
		d, _ := daemonOf(f.Path)
		ok, err := d.reload(ctx, t)
		if err != nil {
			// The daemon runs what it ran before: its file goes back, so
			// the next sync finds the difference and reloads again,
			// rather than taking the new file on disk for applied.
			if old, known := replaced[f.Path]; known {
				_, _ = t.WriteFile(f.Path, old, f.Mode)
			} else {
				_ = os.Remove(t.Path(f.Path))
			}
			return res, err
		}
		if ok {
			res.Reloaded = append(res.Reloaded, d.name)
		}
	}
	return res, nil
}

// frrTakesOver tells whether frr.conf announces an address that the
// keepalived.conf being replaced carries as a VIP (a line of its own
// starting "ADDR/"): the address moves from VRRP to BGP.
func frrTakesOver(oldKeepalived, frrConf []byte) bool {
	vips := map[string]bool{}
	for _, line := range strings.Split(string(oldKeepalived), "\n") {
		if addr, _, ok := strings.Cut(strings.TrimSpace(line), "/"); ok && !strings.ContainsAny(addr, " \t") {
			vips[addr] = true
		}
	}
	for _, line := range strings.Split(string(frrConf), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "network" {
			if addr, _, _ := strings.Cut(f[1], "/"); vips[addr] {
				return true
			}
		}
	}
	return false
}
