package kubeletlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// nodePaths are the directories each node has to itself: bound from the
// node's own directory over the machine's path inside the node's mount
// namespace. The kubelet and containerd use some of them whatever their
// flags say (/var/lib/kubelet/pki, /var/log/pods, /run/containerd,
// /opt/containerd), so two nodes would clobber each other's sockets and
// files without this.
var nodePaths = []string{
	"/etc/kubernetes", onnode.KeepalivedDir, onnode.HaproxyDir, onnode.ConfigDir,
	onnode.RunDir, onnode.HaproxyRunDir,
	onnode.StateDir, "/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/opt/containerd",
	"/var/log/pods", "/var/log/containers",
	// A cluster node's: etcd's data, the CNI configuration and the
	// host-local IPAM's leases (under /run: a reboot forgets them), and
	// containerd's pod network namespaces, which it names in /run/netns.
	"/var/lib/etcd", "/etc/cni/net.d", "/run/cni", "/run/netns",
}

// kernelTunables are the sysctls the kubelet sets on its host unless it
// finds them at these values already (kubelet's setupKernelTunables). The
// lab binds files holding them over /proc/sys inside the node's mount
// namespace, so the machine's own values are never changed.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// mountPoints are the directories of nodePaths the lab had to create on
// the machine to bind over them. They are shared by every node, and
// removing one detaches the bind mounts over it in every other node's
// namespace too, so only the last node to go removes them.
var mountPoints struct {
	sync.Mutex
	users   int
	created []string
}

func releaseMountPoints() error {
	mountPoints.Lock()
	defer mountPoints.Unlock()
	mountPoints.users--
	if mountPoints.users > 0 {
		return nil
	}
	var errs []string
	for i := len(mountPoints.created) - 1; i >= 0; i-- {
		if err := os.Remove(mountPoints.created[i]); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err.Error())
		}
	}
	mountPoints.created = nil
	if len(errs) > 0 {
		return fmt.Errorf("removing mount points: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (n *Node) setupMounts(t testing.TB) {
	t.Helper()
	// A private mount namespace entered into the node's network namespace
	// with nsenter, not `ip netns exec`: that one remounts /sys, which
	// hides the cgroup mounts the kubelet and runc need.
	n.holder = startProc(t, filepath.Join(n.dir, "holder.log"),
		"unshare", "--mount", "--propagation", "private", "--",
		"nsenter", "--net=/run/netns/"+n.Host.NS, "--", "sleep", "infinity")
	// The namespace exists once unshare has exec'd into nsenter.
	deadline := time.Now().Add(5 * time.Second)
	for {
		self, _ := os.Readlink("/proc/self/ns/mnt")
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.pid()))
		if err == nil && theirs != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: mount namespace not created: %v", n.Name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	mountPoints.Lock()
	mountPoints.users++
	n.mounted = true
	for _, p := range nodePaths {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			// A mount point on the machine: empty, removed when the last
			// node is gone.
			if err := os.MkdirAll(p, 0o755); err != nil {
				mountPoints.Unlock()
				t.Fatal(err)
			}
			mountPoints.created = append(mountPoints.created, p)
		}
	}
	mountPoints.Unlock()
	for _, p := range nodePaths {
		own := filepath.Join(n.dir, "root", p)
		if err := os.MkdirAll(own, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "mount --bind %q %q\n", own, p)
	}
	for key, val := range kernelTunables {
		f := filepath.Join(n.dir, "sysctl", strings.ReplaceAll(key, "/", "."))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(val+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "mount --bind %q %q\n", f, "/proc/sys/"+key)
	}
	if out, err := n.Exec("/bin/sh", "-c", script.String()); err != nil {
		t.Fatalf("%s: mounts: %v\n%s", n.Name, err, out)
	}
}

// nodePath is where path lives on the machine for this node: under the
// node's own directory that is bound over one of nodePaths.
func (n *Node) nodePath(path string) (string, error) {
	for _, p := range nodePaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return filepath.Join(n.dir, "root", path), nil
		}
	}
	return "", fmt.Errorf("%s is outside the node's own directories %v: it would land on the machine", path, nodePaths)
}
