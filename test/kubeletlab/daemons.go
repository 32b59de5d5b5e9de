package kubeletlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kubeletPort is the kubelet's API in the node's namespace; the lab reads
// /pods there (anonymous, AlwaysAllow: nothing outside the lab reaches it).
const kubeletPort = 10250

// containerdConfig: the node's paths are the default ones, bound per node;
// the CNI plugins are Debian's (containernetworking-plugins), their
// configuration the node's own (only pods outside the host network use
// them).
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
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
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
		"--hostname-override", n.Name, "--node-ip", n.nodeIPs, "--v", "1"}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	n.kubelet = n.start(t, "kubelet", args...)
	// The kubelet exits when the container runtime's CRI is not ready
	// yet ("server is not initialized yet"), which `ctr version` does not
	// tell: containerd answers before its CRI plugin has restored its
	// state, seen on a loaded machine in a cold start (2026-11-29: two of
	// four kubelets gone, their nodes never back). systemd restarts it
	// (kubelet.service: Restart=always); so does the lab, until the
	// kubelet says the runtime is initialized.
	for attempt := 1; attempt <= kubeletRestarts; attempt++ {
		if err := wait(time.Minute, func() bool {
			log, _ := os.ReadFile(n.kubelet.log)
			return n.kubelet.exited() || strings.Contains(string(log), runtimeInitialized)
		}); err != nil || !n.kubelet.exited() {
			return
		}
		old := fmt.Sprintf("%s.%d", n.kubelet.log, attempt)
		if err := os.Rename(n.kubelet.log, old); err != nil {
			t.Fatal(err)
		}
		t.Logf("kubeletlab %s: the kubelet exited at start (%s), started again as systemd would", n.Name, lastLine(old))
		time.Sleep(time.Second)
		n.kubelet = n.start(t, "kubelet", args...)
	}
}

// runtimeInitialized is what the kubelet logs once its container runtime
// answered through the CRI.
const runtimeInitialized = `"Container runtime initialized"`

// kubeletRestarts bounds the restarts of a kubelet that exits at start.
const kubeletRestarts = 5

// lastLine is the last line of the file at path.
func lastLine(path string) string { return tail(path, 1) }

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
