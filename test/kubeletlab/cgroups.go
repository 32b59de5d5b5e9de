package kubeletlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cgroupHierarchies are the hierarchies mounted under /sys/fs/cgroup: the
// v1 controllers and the hybrid layout's unified (v2) one, where runc
// creates the node's cgroups too.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out, nil
}

// killCgroups SIGKILLs, by PID, every process in the node's cgroups. The
// containers have mount namespaces of their own, so the node's namespace
// does not find them, and a sandbox the kubelet created while it was being
// stopped can outlive containerd (seen: a /pause left behind, its cgroups
// busy).
func killCgroups(root string) {
	for round := 0; round < 50; round++ {
		if signalCgroups(root, syscall.SIGKILL) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signalCgroups sends sig, by PID, to every process in the node's cgroups
// (the pods' containers: containerd and its shims live outside them) and
// returns how many it signalled.
func signalCgroups(root string, sig syscall.Signal) int {
	hs, err := cgroupHierarchies()
	if err != nil {
		return 0
	}
	signalled := map[int]bool{}
	for _, h := range hs {
		_ = filepath.Walk(filepath.Join(h, root), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !signalled[pid] {
					_ = syscall.Kill(pid, sig)
					signalled[pid] = true
				}
			}
			return nil
		})
	}
	return len(signalled)
}

// setupCgroups creates the node's cgroup root in every hierarchy: the
// kubelet on cgroup v1 refuses to start ("missing paths") otherwise.
// cpuset needs its cpus and mems before any task may join.
func (n *Node) setupCgroups(t testing.TB) {
	t.Helper()
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		p := filepath.Join(h, n.cgroupRoot)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("%s: cgroup %s: %v", n.Name, p, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(p, f), v, 0o644)
				}
				if err != nil {
					t.Fatalf("%s: cgroup %s/%s: %v", n.Name, p, f, err)
				}
			}
		}
	}
}

// removeCgroups removes the node's cgroup root and everything below it in
// every hierarchy, leaf first (rmdir of a cgroup with children fails).
func removeCgroups(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []string
	for _, h := range hs {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.Walk(top, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var rmErr error
			// A cgroup whose last task just died may still be busy for a
			// moment.
			_ = wait(5*time.Second, func() bool {
				rmErr = syscall.Rmdir(dirs[i])
				return rmErr == nil || os.IsNotExist(rmErr)
			})
			if rmErr != nil && !os.IsNotExist(rmErr) {
				errs = append(errs, fmt.Sprintf("rmdir %s: %v", dirs[i], rmErr))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cgroups: %s", strings.Join(errs, "; "))
	}
	return nil
}
