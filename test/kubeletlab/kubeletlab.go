// Package kubeletlab runs vipctl's static pods the way a node does: each
// node is a network namespace (test/netlab) plus a mount namespace
// whose /etc/kubernetes, /etc/keepalived, /etc/haproxy, /etc/vipctl,
// /run/vipctl, kubelet and containerd state are its own, with its own
// containerd (Debian's) and a kubelet built from the same Kubernetes release
// as the test apiserver (hack/build-kubelet.sh). The node's files come from
// the MachineConfig `vipctl render` wrote, and the pods run vipctl's own
// image (make image) with no registry.
//
// What running here took is in /work/shared/lab-notes.md and docs/lab.md:
// cgroup v1 (cgroupfs driver, a cgroup root per node created beforehand),
// no CAP_SYS_RESOURCE (restrict_oom_score_adj), the kubelet's host sysctls
// (files bound over them), and the fixed paths bound per node.
package kubeletlab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

// PauseImage is the sandbox image hack/build-kubelet.sh builds.
const PauseImage = "localhost/vipctl-lab/pause:1"

// kubeletPort is the kubelet's API in the node's namespace; the lab reads
// /pods there (anonymous, AlwaysAllow: nothing outside the lab reaches it).
const kubeletPort = 10250

// nodePaths are the directories each node has to itself: bound from the
// node's own directory over the machine's path inside the node's mount
// namespace. The kubelet and containerd use some of them whatever their
// flags say (/var/lib/kubelet/pki, /var/log/pods, /run/containerd,
// /opt/containerd), so two nodes would clobber each other's sockets and
// files without this.
var nodePaths = []string{
	"/etc/kubernetes", "/etc/keepalived", "/etc/haproxy", "/etc/vipctl",
	"/run/vipctl", "/run/haproxy",
	"/var/lib/vipctl", "/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/opt/containerd",
	"/var/log/pods", "/var/log/containers",
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

// Require fails the test (never skips) when the lab cannot run: CI runs as
// root with everything `make test` installs and builds.
func Require(t testing.TB) string {
	t.Helper()
	netlab.Require(t)
	for _, c := range []string{"containerd", "ctr", "runc", "unshare", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("kubeletlab needs %s: run hack/install-deps.sh (make test does)", c)
		}
	}
	bin := BinDir(t)
	for _, f := range []string{"kubelet", "pause-image.tar", "vipctl-image.tar"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("kubeletlab needs bin/%s: run make deps image (make test does): %v", f, err)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil {
		t.Fatalf("kubeletlab is written for cgroup v1 (these machines): %v", err)
	}
	return bin
}

// BinDir is the repository's bin/.
func BinDir(t testing.TB) string {
	t.Helper()
	return fixture.Repo("bin")
}

// Options describe one node.
type Options struct {
	// Name is the node's name (the kubelet's --hostname-override, which
	// the static pods read as spec.nodeName).
	Name string
	// Host is the node's network namespace.
	Host *netlab.Host
	// NodeIP is the node's address (--node-ip).
	NodeIP string
	// Files are what the node's MachineConfig lays down
	// (MachineConfigFiles).
	Files []File
	// Kubeconfig, if set, is written to /var/lib/kubelet/kubeconfig: the
	// node credentials the sidecar reads.
	Kubeconfig []byte
	// Images are OCI archives imported into the node's containerd.
	Images []string
}

// Node is one running node.
type Node struct {
	Name   string
	Host   *netlab.Host
	NodeIP string
	t      testing.TB
	dir    string
	bin    string
	// holder keeps the node's mount namespace alive; every process of
	// the node is entered into it by PID.
	holder     *proc
	containerd *proc
	kubelet    *proc
	cgroupRoot string
	// mounted: this node counts in mountPoints.users.
	mounted bool
	http    *http.Client
}

// Start brings a node up: mount namespace, files, containerd with the
// images imported, then the kubelet in standalone mode (no API server), as
// on a node's first boot.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	bin := Require(t)
	n := &Node{Name: o.Name, Host: o.Host, NodeIP: o.NodeIP, t: t, dir: filepath.Join(t.TempDir(), o.Name), bin: bin}
	n.cgroupRoot = "/" + o.Host.NS
	t.Cleanup(n.Stop)
	n.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: o.Host.DialContext,
		// The kubelet serves a self-signed certificate; only the lab talks
		// to it.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // lab only
	}}
	n.setupMounts(t)
	n.layDown(t, o)
	n.setupCgroups(t)
	n.startContainerd(t)
	for _, img := range append([]string{filepath.Join(bin, "pause-image.tar")}, o.Images...) {
		if out, err := n.Exec("ctr", "-n", "k8s.io", "images", "import", "--no-unpack=false", img); err != nil {
			t.Fatalf("%s: importing %s: %v\n%s", n.Name, img, err, out)
		}
	}
	n.StartKubelet(t, "")
	return n
}

// Exec runs argv inside the node (its mount and network namespaces).
func (n *Node) Exec(argv ...string) ([]byte, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.holder.pid()), "-m", "-n", "--"}, argv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %s: %w", n.Name, strings.Join(argv, " "), err)
	}
	return out, nil
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

// WriteFile writes a file of the node, as the machine-config daemon does:
// parents created 0755, then the file with its mode, owned by root.
func (n *Node) WriteFile(path string, mode os.FileMode, data []byte) error {
	p, err := n.nodePath(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // umask
		return err
	}
	return os.Rename(tmp, p)
}

// RemoveFile removes a file of the node (a static pod manifest: the
// kubelet stops the pod, running its preStop hooks).
func (n *Node) RemoveFile(path string) error {
	p, err := n.nodePath(path)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

func (n *Node) layDown(t testing.TB, o Options) {
	t.Helper()
	for _, f := range o.Files {
		if err := n.WriteFile(f.Path, f.Mode, f.Data); err != nil {
			t.Fatalf("%s: %s: %v", n.Name, f.Path, err)
		}
	}
	if o.Kubeconfig != nil {
		if err := n.WriteFile("/var/lib/kubelet/kubeconfig", 0o600, o.Kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	// The keepalived pod mounts the kubelet's PKI directory; a real node
	// has it from its bootstrap.
	if p, err := n.nodePath("/var/lib/kubelet/pki"); err != nil || os.MkdirAll(p, 0o755) != nil {
		t.Fatalf("%s: /var/lib/kubelet/pki: %v", n.Name, err)
	}
	for _, f := range []struct{ path, data string }{
		{"/etc/kubernetes/containerd.toml", containerdConfig},
		{"/etc/kubernetes/kubelet.yaml", kubeletConfig(n.cgroupRoot)},
	} {
		if err := n.WriteFile(f.path, 0o644, []byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
}

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
	hs, err := cgroupHierarchies()
	if err != nil {
		return
	}
	for round := 0; round < 50; round++ {
		left := 0
		for _, h := range hs {
			_ = filepath.Walk(filepath.Join(h, root), func(p string, info os.FileInfo, err error) error {
				if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						left++
					}
				}
				return nil
			})
		}
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// containerdConfig: the node's paths are the default ones, bound per node.
// restrict_oom_score_adj: these VMs withhold CAP_SYS_RESOURCE, and runc
// fails ("can't get final child's PID from pipe") when it may not raise
// oom_score_adj.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "/opt/containerd"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`

// kubeletConfig: cgroup v1 is deprecated and refused unless
// failCgroupV1 is false; cgroupfs because no systemd runs here; a cgroup
// root of the node's own. Eviction off: the lab's disk and memory are the
// machine's, and evicting a VIP pod proves nothing. fileCheckFrequency 1s:
// a removed manifest stops its pod at once, as inotify does on a node.
func kubeletConfig(cgroupRoot string) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ` + cgroupRoot + `
cgroupsPerQOS: true
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 1s
syncFrequency: 5s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
port: ` + strconv.Itoa(kubeletPort) + `
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
resolvConf: ""
serializeImagePulls: false
`
}

func (n *Node) startContainerd(t testing.TB) {
	t.Helper()
	n.containerd = n.start(t, "containerd", "containerd", "--config", "/etc/kubernetes/containerd.toml")
	if err := wait(30*time.Second, func() bool {
		_, err := n.Exec("ctr", "version")
		return err == nil
	}); err != nil {
		t.Fatalf("%s: containerd not answering: %v\n%s", n.Name, err, n.containerd.logTail(30))
	}
}

// StartKubelet starts the node's kubelet: standalone (static pods only, no
// API server) when kubeconfig is "", else registered with the API server
// through that file (a path inside the node), which makes mirror pods.
func (n *Node) StartKubelet(t testing.TB, kubeconfig string) {
	t.Helper()
	args := []string{filepath.Join(n.bin, "kubelet"),
		"--config", "/etc/kubernetes/kubelet.yaml",
		"--hostname-override", n.Name, "--node-ip", n.NodeIP, "--v", "1"}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	n.kubelet = n.start(t, "kubelet", args...)
}

// StopKubelet stops the kubelet only; its pods keep running, as on a node
// whose kubelet restarts.
func (n *Node) StopKubelet() {
	if n.kubelet != nil {
		n.kubelet.stop()
		n.kubelet = nil
	}
}

func (n *Node) start(t testing.TB, name string, argv ...string) *proc {
	t.Helper()
	return startProc(t, filepath.Join(n.dir, name+".log"),
		append([]string{"nsenter", "-t", strconv.Itoa(n.holder.pid()), "-m", "-n", "--"}, argv...)...)
}

// Pods are the pods the kubelet runs, with their status, from its /pods.
func (n *Node) Pods(ctx context.Context) ([]corev1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(n.NodeIP, strconv.Itoa(kubeletPort))+"/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: kubelet /pods: %w", n.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: kubelet /pods: %w", n.Name, err)
	}
	return list.Items, nil
}

// Pod is the kubelet's view of the static pod named name (the manifest's
// name; the kubelet appends -<node>).
func (n *Node) Pod(ctx context.Context, name string) (*corev1.Pod, error) {
	pods, err := n.Pods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name+"-"+n.Name {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// PodReady reports whether the pod is Ready in the kubelet's view.
func PodReady(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ContainerID is the containerd ID of a running container of the pod.
func ContainerID(p *corev1.Pod, container string) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			return strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	return ""
}

// KillContainer SIGKILLs a container's main process through containerd,
// as a crash would end it; the kubelet restarts it.
func (n *Node) KillContainer(id string) error {
	_, err := n.Exec("ctr", "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id)
	return err
}

// Logs is the tail of the node's kubelet and containerd logs, for failure
// messages.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	for _, p := range []*proc{n.kubelet, n.containerd} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s %s\n%s\n", n.Name, filepath.Base(p.log), p.logTail(lines))
		}
	}
	return b.String()
}

// ContainerLogs is the tail of every container log of the node.
func (n *Node) ContainerLogs(lines int) string {
	var b strings.Builder
	root := filepath.Join(n.dir, "root", "/var/log/pods")
	_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		fmt.Fprintf(&b, "--- %s %s\n%s\n", n.Name, strings.TrimPrefix(p, root), tail(p, lines))
		return nil
	})
	return b.String()
}

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
// manifests removed (pods stopped, preStop hooks run), kubelet stopped,
// leftover containers and their shims ended, containerd stopped, every
// process still in the node's mount namespace or its cgroups killed by
// PID, the namespace released, cgroups removed leaf first, mount points created on
// the machine removed.
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
		if p, err := n.nodePath("/etc/kubernetes/manifests"); err == nil {
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

// proc is a process of the lab in a process group of its own, stopped by
// PID.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, log string, argv ...string) *proc {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(argv, " "), err)
	}
	p := &proc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group, SIGKILL after 10 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) logTail(n int) string { return tail(p.log, n) }

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
