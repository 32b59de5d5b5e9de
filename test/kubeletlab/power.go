package kubeletlab

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ShutdownGrace is how long PowerOff(true) gives the containers after
// SIGTERM, as a node's shutdown waits for its container runtime, before
// the rest is killed.
const ShutdownGrace = 15 * time.Second

// PowerOff ends the node as a machine ends, leaving its disk: the files,
// etcd's data, containerd's images and containers. Graceful is a reboot's
// shutdown: the kubelet stops, then every container gets SIGTERM from
// containerd and up to ShutdownGrace to end (preStop hooks do not run: the
// kubelet is not the one stopping them), then containerd stops. Otherwise
// it is a power loss: every process of the node is SIGKILLed at once.
// Either way what lives under /run is gone afterwards (a tmpfs), and the
// node's network namespace is the caller's to reset (netlab's
// Host.Reboot) before Boot.
func (n *Node) PowerOff(graceful bool) {
	if n.holder == nil {
		return
	}
	if graceful {
		n.StopKubelet()
		for _, id := range n.tasks() {
			_, _ = n.Exec("ctr", "-n", "k8s.io", "tasks", "kill", id)
		}
		began := time.Now()
		if err := wait(ShutdownGrace, func() bool { return len(n.tasks()) == 0 }); err != nil {
			n.t.Logf("kubeletlab %s: tasks %v still running %s after SIGTERM: killed", n.Name, n.tasks(), ShutdownGrace)
		} else {
			n.t.Logf("kubeletlab %s: every container ended %s after SIGTERM", n.Name, time.Since(began).Round(time.Millisecond))
		}
		if n.containerd != nil {
			n.containerd.stop()
		}
	}
	for _, p := range []*proc{n.kubelet, n.containerd} {
		if p != nil {
			p.kill()
		}
	}
	n.kubelet, n.containerd = nil, nil
	n.killNamespace()
	killCgroups(n.cgroupRoot)
	n.holder.stop()
	n.holder = nil
	if err := removeCgroups(n.cgroupRoot); err != nil {
		n.t.Errorf("kubeletlab %s: %v", n.Name, err)
	}
	if n.mounted {
		n.mounted = false
		if err := releaseMountPoints(); err != nil {
			n.t.Errorf("kubeletlab %s: %v", n.Name, err)
		}
	}
	for _, p := range nodePaths {
		if !strings.HasPrefix(p, "/run/") {
			continue
		}
		dir := filepath.Join(n.dir, "root", p)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				n.t.Errorf("kubeletlab %s: clearing %s: %v", n.Name, p, err)
			}
		}
	}
}

// Boot starts a node PowerOff ended: its mount namespace, cgroups,
// containerd (which finds its images and the containers it had, none
// running) and the kubelet, with the files on its disk.
func (n *Node) Boot(t testing.TB) {
	t.Helper()
	if n.holder != nil {
		t.Fatalf("kubeletlab %s: Boot while running", n.Name)
	}
	n.setupMounts(t)
	n.setupCgroups(t)
	n.startContainerd(t)
	n.StartKubelet(t, n.kubeconfig)
}

// Running tells whether the node is up (not powered off).
func (n *Node) Running() bool { return n.holder != nil }

// kill SIGKILLs the process group and waits for it.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}
