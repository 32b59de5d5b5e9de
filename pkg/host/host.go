// Package host is the one handle on a node: where its files live, which
// network namespace is its own, and which binaries judge its configs.
// Every package that touches a node (the reconcile, the data plane, FRR,
// the sidecar) takes a Target and reaches the node only through it, so
// the lab can run several nodes on one machine, each with a directory and
// a namespace of its own. Its rule: no knowledge of what the files or the
// namespace hold; only how to reach them safely (paths under the root,
// atomic writes, a thread entered into the namespace). It imports nothing
// of vipctl's, so the test harness (test/netlab) can use it too.
package host

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
)

// Target is one node. On a real node Root and Netns are empty (the
// host's filesystem and network); the network-namespace lab gives each
// node a directory and a namespace of its own.
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
	// TempDir holds scratch files; empty means os.TempDir().
	TempDir string
}

// Path is a node path (pkg/render's layout) on this target.
func (t Target) Path(p string) string { return filepath.Join(t.Root, p) }

// WriteFile makes the node file p hold data with mode's permissions,
// through a temporary file and a rename, so a reader (keepalived
// reloading, the kubelet) never sees half a file. A file that already
// holds them is not touched; changed says whether it was written.
func (t Target) WriteFile(p string, data []byte, mode fs.FileMode) (changed bool, err error) {
	path := t.Path(p)
	cur, err := os.ReadFile(path)
	if err == nil && bytes.Equal(cur, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == mode.Perm() {
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
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode.Perm()); err != nil {
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

// WriteFlag writes a run file keepalived tracks: "1" for on, "0" for off
// (keepalived counts a non-zero track file as a fault).
func (t Target) WriteFlag(path string, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return t.WriteTrackValue(path, v)
}

// WriteTrackValue writes the number a keepalived track file holds.
func (t Target) WriteTrackValue(path string, v int) error {
	_, err := t.WriteFile(path, []byte(strconv.Itoa(v)+"\n"), 0o644)
	return err
}

// InNetns calls fn on a thread locked into the target's network namespace
// (where it is, for a real node), so that sockets fn opens, netlink's
// among them, belong to that namespace. If switching back fails the
// thread stays locked, so the runtime retires it rather than reuse a
// thread in the wrong namespace.
func (t Target) InNetns(fn func() error) error {
	if t.Netns == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = orig.Close() }()
	target, err := netns.GetFromName(t.Netns)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", t.Netns, err)
	}
	defer func() { _ = target.Close() }()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(fnErr, fmt.Errorf("returning to the original namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// WithNetnsFd calls fn with the target's network namespace as a file
// descriptor, or -1 for the current one (a real node): for APIs that take
// the namespace as a handle (nftables, a netlink handle) instead of
// running on a thread inside it.
func (t Target) WithNetnsFd(fn func(fd int) error) error {
	if t.Netns == "" {
		return fn(-1)
	}
	ns, err := netns.GetFromName(t.Netns)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", t.Netns, err)
	}
	defer func() { _ = ns.Close() }()
	return fn(int(ns))
}
