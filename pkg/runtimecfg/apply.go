// Package runtimecfg is the sidecar that keeps keepalived and haproxy in
// step with the cluster: desired files come from the pure renderer, the real
// daemons judge them, they are written atomically and the daemons reloaded.
// On any failure the files on disk stay as they were (the last good config).
package runtimecfg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/render"
)

// Target is the one handle on a node: where its files live and which
// network namespace is its own. On a real node both are empty (the host's
// filesystem and network); the network-namespace lab runs several nodes on
// one machine, each with a directory and a namespace of its own. Every step
// that touches the node (config tests, nftables, routes, ARP settings)
// takes both from here.
type Target struct {
	// Root prefixes every node path.
	Root string
	// Netns names the node's network namespace.
	Netns string
	// Keepalived, Haproxy and Vtysh are the binaries that judge configs;
	// empty means from PATH.
	Keepalived, Haproxy, Vtysh string
	// FRRReload is frr-reload.py; empty means where Debian's
	// frr-pythontools puts it.
	FRRReload string
}

func (t Target) path(p string) string { return filepath.Join(t.Root, p) }

// check runs the daemons' config tests where the node's interfaces are.
func (t Target) check() configcheck.Options {
	return configcheck.Options{Netns: t.Netns, Keepalived: t.Keepalived, Haproxy: t.Haproxy, Vtysh: t.Vtysh}
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
func Apply(ctx context.Context, t Target, files []render.File) (Result, error) {
	var res Result
	var configs []render.File
	for _, f := range files {
		if f.Path == render.KeepalivedConfPath || f.Path == render.HaproxyConfPath || f.Path == render.FRRConfPath {
			configs = append(configs, f)
			continue
		}
		changed, err := writeIfChanged(t.path(f.Path), f)
		if err != nil {
			return res, err
		}
		if changed {
			res.Written = append(res.Written, f.Path)
		}
	}
	var changed []render.File
	for _, f := range configs {
		cur, err := os.ReadFile(t.path(f.Path))
		if err == nil && bytes.Equal(cur, f.Data) {
			continue
		}
		// The configs were rendered with t.Root already in their paths, so
		// the scripts they name are checked where they stand.
		switch f.Path {
		case render.KeepalivedConfPath:
			err = configcheck.Keepalived(ctx, f.Data, t.check())
		case render.HaproxyConfPath:
			err = configcheck.Haproxy(ctx, f.Data, t.check())
		case render.FRRConfPath:
			err = configcheck.FRR(ctx, f.Data, t.check())
		}
		if err != nil {
			return res, fmt.Errorf("keeping the last good %s: %w", f.Path, err)
		}
		changed = append(changed, f)
	}
	// FRR first: when a pool moves from vrrp to bgp, the routers learn its
	// /32s while keepalived still holds the addresses, and only then does
	// keepalived let them go (make before break). The other way round
	// VRRP needs its master-down interval anyway, which no order saves.
	rank := func(f render.File) int {
		if f.Path == render.FRRConfPath {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(changed, func(a, b render.File) int { return rank(a) - rank(b) })
	for _, f := range changed {
		if _, err := writeIfChanged(t.path(f.Path), f); err != nil {
			return res, err
		}
		res.Written = append(res.Written, f.Path)
		switch f.Path {
		case render.KeepalivedConfPath:
			ok, err := ReloadKeepalived(t)
			if err != nil {
				return res, err
			}
			if ok {
				res.Reloaded = append(res.Reloaded, "keepalived")
			}
		case render.HaproxyConfPath:
			ok, err := ReloadHaproxy(ctx, t)
			if err != nil {
				return res, err
			}
			if ok {
				res.Reloaded = append(res.Reloaded, "haproxy")
			}
		case render.FRRConfPath:
			ok, err := ReloadFRR(ctx, t)
			if err != nil {
				return res, err
			}
			if ok {
				res.Reloaded = append(res.Reloaded, daemonFRR)
			}
		}
	}
	return res, nil
}

// writeIfChanged writes f at path through a temporary file and a rename,
// so a reader (keepalived reloading, kubelet) never sees half a file.
func writeIfChanged(path string, f render.File) (bool, error) {
	cur, err := os.ReadFile(path)
	if err == nil && bytes.Equal(cur, f.Data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == f.Mode.Perm() {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after a successful rename
	if _, err := tmp.Write(f.Data); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(f.Mode.Perm()); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

// ReloadKeepalived sends SIGHUP to keepalived's parent, found through its
// PID file: keepalived re-reads the config and keeps VRRP state for
// instances whose settings did not change. false means keepalived is not
// running yet (it will read the file when it starts).
func ReloadKeepalived(t Target) (bool, error) {
	data, err := os.ReadFile(t.path(render.KeepalivedPIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return false, fmt.Errorf("%s: no PID in %q", render.KeepalivedPIDFile, data)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("reloading keepalived (pid %d): %w", pid, err)
	}
	return true, nil
}

// ReloadHaproxy asks haproxy's master process to reload through its
// master socket: new workers take over the listening sockets, old ones
// finish their connections. false means haproxy is not running yet.
func ReloadHaproxy(ctx context.Context, t Target) (bool, error) {
	sock := t.path(render.HaproxyMasterSocket)
	if _, err := os.Stat(sock); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return false, nil
		}
		return false, fmt.Errorf("haproxy master socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("reload\n")); err != nil {
		return false, fmt.Errorf("haproxy reload: %w", err)
	}
	return true, nil
}
