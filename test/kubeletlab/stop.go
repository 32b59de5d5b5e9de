package kubeletlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopAll tears several nodes down at once: each takes seconds (pods
// stopped with their preStop hooks, containerd, cgroups) and they share
// nothing, so one after the other would only add up the waits.
func StopAll(nodes []*Node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
}

// Stop tears the node down in the order that leaves nothing behind:
// manifests removed (pods stopped, preStop hooks run; not on a registered
// node), kubelet stopped, leftover containers and their shims ended,
// containerd stopped, every process still in the node's mount namespace
// or its cgroups killed by PID, the namespace released, cgroups removed
// leaf first, mount points created on the machine removed.
// It is idempotent, and also runs when the test ends.
func (n *Node) Stop() {
	if n.holder == nil {
		return
	}
	start, last := time.Now(), time.Now()
	var phases []string
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %s", name, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
	}
	defer func() {
		n.t.Logf("kubeletlab %s: torn down in %s (%s)", n.Name, time.Since(start).Round(time.Millisecond), strings.Join(phases, ", "))
	}()
	if n.kubelet != nil {
		// A registered node (the cluster lab) also runs pods of the API's
		// Deployments, which no manifest stops: waiting for its tasks to
		// end would only wait out the timeout. Its pods are killed below
		// with the rest, without preStop hooks, as a power cut would.
		if p, err := n.nodePath("/etc/kubernetes/manifests"); err == nil && n.kubeconfig == "" {
			entries, _ := os.ReadDir(p)
			for _, e := range entries {
				_ = os.Remove(filepath.Join(p, e.Name()))
			}
			// The kubelet drops removed static pods from /pods at once;
			// their containers stop later, after the preStop hooks. Gone
			// means containerd runs no task any more.
			_ = wait(30*time.Second, func() bool { return len(n.tasks()) == 0 })
			phase("pods")
		}
		n.StopKubelet()
		phase("kubelet")
	}
	if n.containerd != nil && !n.containerd.exited() {
		// What the kubelet did not stop: killed and deleted in one call
		// each (delete --force), not polled one after the other.
		for _, id := range n.tasks() {
			_, _ = n.Exec("ctr", "-n", "k8s.io", "tasks", "delete", "--force", id)
		}
		phase("tasks")
		n.containerd.stop()
		phase("containerd")
	}
	n.killNamespace()
	killCgroups(n.cgroupRoot)
	n.holder.stop()
	n.holder = nil
	phase("namespace")
	if err := removeCgroups(n.cgroupRoot); err != nil {
		n.t.Errorf("kubeletlab %s: %v", n.Name, err)
	}
	phase("cgroups")
	if n.mounted {
		n.mounted = false
		if err := releaseMountPoints(); err != nil {
			n.t.Errorf("kubeletlab %s: %v", n.Name, err)
		}
	}
}

// tasks are the IDs of the tasks (running containers) in the node's
// containerd.
func (n *Node) tasks() []string {
	out, err := n.Exec("ctr", "-n", "k8s.io", "tasks", "ls", "-q")
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// killNamespace SIGKILLs every process left in the node's mount namespace
// but the holder (shims, container processes), by PID: the namespace
// identifies them, never their name.
func (n *Node) killNamespace() {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.pid()))
	if err != nil {
		return
	}
	for round := 0; round < 50; round++ {
		left := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == n.holder.pid() {
				continue
			}
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == ns {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Errorf("kubeletlab %s: processes left in the node's mount namespace after SIGKILL", n.Name)
}

func wait(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// runningTasks are the IDs of the node's tasks still running (a task that
// ended stays listed, STOPPED, until deleted).
func (n *Node) runningTasks() []string {
	out, err := n.Exec("ctr", "-n", "k8s.io", "tasks", "ls")
	if err != nil {
		return nil
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "RUNNING" {
			ids = append(ids, f[0])
		}
	}
	return ids
}
