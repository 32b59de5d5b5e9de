package kubeletlab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// Shutdown ends the node as a reboot does on a machine without the
// kubelet's graceful node shutdown: the kubelet stops first, then every
// process of every container gets SIGTERM at once, by PID (systemd
// stopping the containers' scopes), they have up to grace to end, and
// what still runs is killed with the rest as PowerOff does. No preStop
// hook runs: the kubelet that would run it is gone. The node's network
// namespace is the caller's to reset before Boot, as after PowerOff.
func (n *Node) Shutdown(grace time.Duration) {
	if n.holder == nil {
		return
	}
	n.StopKubelet()
	signalCgroups(n.cgroupRoot, syscall.SIGTERM)
	if err := wait(grace, func() bool { return signalCgroups(n.cgroupRoot, 0) == 0 }); err != nil {
		var names []string
		for _, id := range n.runningTasks() {
			names = append(names, n.containerName(id))
		}
		n.t.Logf("kubeletlab %s: containers still running %s after SIGTERM, killed: %s", n.Name, grace, strings.Join(names, ", "))
	}
	n.PowerOff()
}

// ImportImage imports an OCI archive into the running node's containerd,
// as a pull from a registry would put it there.
func (n *Node) ImportImage(archive string) error {
	if out, err := n.Exec("ctr", "-n", "k8s.io", "images", "import", "--no-unpack=false", archive); err != nil {
		return fmt.Errorf("%s: importing %s: %w\n%s", n.Name, archive, err, out)
	}
	return nil
}

// containerName is the pod/container a task of the kubelet's runs for,
// from its container's labels; the ID if they cannot be read.
func (n *Node) containerName(id string) string {
	out, err := n.Exec("ctr", "-n", "k8s.io", "containers", "info", id)
	if err != nil {
		return id
	}
	var info struct {
		Labels map[string]string `json:"Labels"`
	}
	if json.Unmarshal(out, &info) != nil || info.Labels["io.kubernetes.pod.name"] == "" {
		return id
	}
	name := info.Labels["io.kubernetes.pod.name"] + "/" + info.Labels["io.kubernetes.container.name"]
	if info.Labels["io.kubernetes.container.name"] == "" {
		name += "(sandbox)"
	}
	return name
}
