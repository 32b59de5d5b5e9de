package kubeletlab

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// PowerOff ends the node as a power loss does, leaving its disk: the
// files, etcd's data, containerd's images and containers. Every process
// of the node is SIGKILLed at once, what lives under /run is gone
// afterwards (a tmpfs), and the node's network namespace is the caller's
// to reset (netlab's Host.Reboot) before Boot.
func (n *Node) PowerOff() {
	if n.holder == nil {
		return
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
