// Package kubeletlab runs vipctl's static pods the way a node does: each
// node is a network namespace (test/netlab) plus a mount namespace
// whose /etc/kubernetes, vipctl's directories (/etc/vipctl*, /run/vipctl*,
// /var/lib/vipctl), kubelet and containerd state are its own, with its own
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
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

// PauseImage is the sandbox image hack/build-kubelet.sh builds.
const PauseImage = "localhost/vipctl-lab/pause:1"

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
	// Tags name imported images a second time (new name -> imported
	// name), as `ctr images tag` does: one image under a name of its own
	// for another use, imported once.
	Tags map[string]string
	// NodeIPs are further addresses of the node for the kubelet's
	// --node-ip (a dual-stack node's IPv6 one).
	NodeIPs []string
	// Register starts the kubelet with /var/lib/kubelet/kubeconfig
	// (Kubeconfig): it registers its Node and makes mirror pods of its
	// static pods. Otherwise it runs standalone, as on a node's first boot.
	Register bool
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
	// nodeIPs is the kubelet's --node-ip, kubeconfig its --kubeconfig
	// ("" standalone).
	nodeIPs    string
	kubeconfig string
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
	n := prepare(t, o)
	n.StartKubelet(t, n.kubeconfig)
	return n
}

// prepare is Start up to the kubelet: the node with its files, cgroups and
// containerd holding the images.
func prepare(t testing.TB, o Options) *Node {
	t.Helper()
	bin := Require(t)
	n := &Node{Name: o.Name, Host: o.Host, NodeIP: o.NodeIP, t: t, dir: filepath.Join(t.TempDir(), o.Name), bin: bin}
	n.cgroupRoot = "/" + o.Host.NS
	n.nodeIPs = strings.Join(append([]string{o.NodeIP}, o.NodeIPs...), ",")
	if o.Register {
		n.kubeconfig = NodeKubeconfig
	}
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
		if err := n.ImportImage(img); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range o.Tags {
		if out, err := n.Exec("ctr", "-n", "k8s.io", "images", "tag", "--force", src, name); err != nil {
			t.Fatalf("%s: tagging %s as %s: %v\n%s", n.Name, src, name, err, out)
		}
	}
	return n
}

// NodeKubeconfig is where Options.Kubeconfig is written: the kubelet's
// credential on an OpenShift node, which vipctl's sidecar reads too.
const NodeKubeconfig = "/var/lib/kubelet/kubeconfig"

// Exec runs argv inside the node (its mount and network namespaces).
func (n *Node) Exec(argv ...string) ([]byte, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.holder.pid()), "-m", "-n", "--"}, argv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %s: %w", n.Name, strings.Join(argv, " "), err)
	}
	return out, nil
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
		if err := n.WriteFile(NodeKubeconfig, 0o600, o.Kubeconfig); err != nil {
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

// ImageName is the name an OCI archive's image gets when imported (its
// index's io.containerd.image.name), which pods name.
func ImageName(t testing.TB, archive string) string {
	t.Helper()
	out, err := exec.Command("tar", "-xOf", archive, "index.json").Output()
	if err != nil {
		t.Fatalf("reading %s's index: %v", archive, err)
	}
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(out, &idx); err != nil || len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["io.containerd.image.name"] == "" {
		t.Fatalf("%s: index.json names no one image: %v\n%s", archive, err, out)
	}
	return idx.Manifests[0].Annotations["io.containerd.image.name"]
}

// ReadFile reads a file of the node.
func (n *Node) ReadFile(path string) ([]byte, error) {
	p, err := n.nodePath(path)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}
