// Package clusterlab runs a Kubernetes cluster in the lab, so that every
// VIP vipctl carries is proven on the way a user's traffic takes: three
// control-plane nodes and a worker, each a node of test/kubeletlab (a
// network and a mount namespace with its own containerd and kubelet),
// whose kubelets register through the API VIP with client certificates of
// the lab's CA under the Node authorizer and NodeRestriction. Each
// control-plane node runs etcd (one three-member cluster), kube-apiserver,
// kube-controller-manager and kube-scheduler as static pods next to
// vipctl's own, as an OpenShift control-plane node does; every node runs
// kube-proxy in nftables mode as a static pod. Pods get addresses from
// Debian's CNI plugins (bridge, host-local, loopback, portmap) and reach
// each other across nodes by host-gw routes. The workloads are real
// Deployments behind real Services: an echo server behind LoadBalancer
// Services of a vrrp pool (both announce modes) and of a bgp pool (the
// lab's FRR router), with externalTrafficPolicy Cluster and Local, and a
// router stand-in (hostNetwork) for the default IngressController. The
// allocator is vipctl's own Deployment.
//
// Every Kubernetes binary is built from the module pinned in
// hack/apiserver (hack/build-apiserver.sh, build-kubelet.sh,
// build-cluster.sh); the components run in vipctl's image (a Debian with
// the nft that kube-proxy's nftables mode calls) under a name of the
// lab's own, with their binary mounted from bin/: no image to build or
// import per component. docs/lab.md draws the cluster.
package clusterlab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// Addresses of the cluster. The machine network is dual-stack; pods,
// ClusterIPs and the bgp pool live in 203.0.113.0/24 and 2001:db8::/32
// outside it.
const (
	APIVIP4     = "198.51.100.5"
	APIVIP6     = "2001:db8:100::5"
	IngressVIP4 = "198.51.100.6"
	IngressVIP6 = "2001:db8:100::6"
	// The router (real FRR): every node's BGP peer, and the way from the
	// client to the bgp pool's addresses.
	TorIP4    = "198.51.100.1"
	TorIP6    = "2001:db8:100::1"
	ClientIP4 = "198.51.100.100"
	ClientIP6 = "2001:db8:100::100"

	machineNet4 = "198.51.100.0/24"
	machineNet6 = "2001:db8:100::/64"
	// clusterCIDRs hold every node's pod range (podCIDRs), serviceCIDRs
	// the ClusterIPs.
	clusterCIDR4 = "203.0.113.0/25"
	clusterCIDR6 = "2001:db8:200::/56"
	serviceCIDR4 = "203.0.113.128/26"
	serviceCIDR6 = "2001:db8:5e::/112"
	// kubernetesIP4 is the first address of serviceCIDR4: the ClusterIP
	// of default/kubernetes, which the apiservers' certificate names.
	kubernetesIP4 = "203.0.113.129"
	kubernetesIP6 = "2001:db8:5e::1"
	// bgpPool4 and bgpPool6 are routed by the router to the nodes that
	// announce them; the client reaches them through it.
	bgpPool4 = "203.0.113.240/28"
	bgpPool6 = "2001:db8:300::/124"
)

// Pools of the cluster file.
const (
	// PoolVRRP: keepalived adds the Services' addresses (announce
	// keepalived), the pool Services get when they name none.
	PoolVRRP = "vrrp"
	// PoolSidecar: keepalived carries only an anchor, the sidecar adds
	// the Services' addresses (announce: sidecar).
	PoolSidecar = "vrrp-sidecar"
	// PoolBGP: announced as routes to the router (mode: bgp).
	PoolBGP = "bgp"
)

// Roles of the nodes (the MachineConfig pools).
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// NodeSpec is one node of the cluster.
type NodeSpec struct {
	Name string
	Role string
	IP4  string
	IP6  string
	// PodCIDR4 and PodCIDR6 are the node's pod ranges: its CNI
	// configuration hands them out, and the other nodes route them to its
	// address (host-gw).
	PodCIDR4 string
	PodCIDR6 string
}

// Nodes are the cluster's nodes: three control-plane nodes (schedulable,
// as in a compact OpenShift cluster, so that pods can move between
// them) and a worker.
var Nodes = []NodeSpec{
	{Name: "master-0", Role: RoleMaster, IP4: "198.51.100.11", IP6: "2001:db8:100::11", PodCIDR4: "203.0.113.0/27", PodCIDR6: "2001:db8:200::/64"},
	{Name: "master-1", Role: RoleMaster, IP4: "198.51.100.12", IP6: "2001:db8:100::12", PodCIDR4: "203.0.113.32/27", PodCIDR6: "2001:db8:200:1::/64"},
	{Name: "master-2", Role: RoleMaster, IP4: "198.51.100.13", IP6: "2001:db8:100::13", PodCIDR4: "203.0.113.64/27", PodCIDR6: "2001:db8:200:2::/64"},
	{Name: "worker-0", Role: RoleWorker, IP4: "198.51.100.21", IP6: "2001:db8:100::21", PodCIDR4: "203.0.113.96/27", PodCIDR6: "2001:db8:200:3::/64"},
}

// Options vary the cluster.
type Options struct {
	// Profile is the VRRP timer profile (default: default). The fast
	// profile's 100 ms adverts come late on two cores shared with three
	// apiservers and etcd, and peers take VIPs that were never lost.
	Profile string
	// BFD turns on BFD on the BGP sessions (both sides).
	BFD bool
	// From is the vipctl the cluster is installed with, as a user
	// installs it: its render, its manifests and MachineConfigs, its image
	// (zero: this tree's, ThisTree).
	From Release
}

// Cluster is a running cluster.
type Cluster struct {
	t      testing.TB
	dir    string
	bin    string
	opts   Options
	Lab    *netlab.Lab
	Client *netlab.Host
	Tor    *netlab.Host
	Router *lab.FRR
	Nodes  []*Node
	// Admin is a cluster-admin client that reaches the API through the
	// API VIP from the client's namespace, as kubectl on an
	// administrator's machine does.
	Admin       kubernetes.Interface
	AdminConfig *rest.Config
	// ConfigPath is the cluster file, Kubeconfig the administrator's
	// kubeconfig (the client's view: through the API VIP).
	ConfigPath string
	Kubeconfig string
	// Image is vipctl's image the nodes run (its name in containerd).
	Image string
	// Release is the vipctl installed: the nodes run its image, and the
	// administrator's commands (Vipctl) are its binary's.
	Release Release
	pki     *pki
	// roleFiles are the files of each role's MachineConfig.
	roleFiles map[string][]kubeletlab.File
}

// Node is one node of the cluster.
type Node struct {
	*kubeletlab.Node
	Spec NodeSpec
}

// BaseImage is the name the Kubernetes components' static pods give
// vipctl's image: tagged on every node, so that changing vipctl's image
// (a rolling upgrade) leaves them alone.
const BaseImage = "localhost/vipctl-lab/base:1"

// binDir is where the lab mounts bin/ in the components' containers.
const binDir = "/lab-bin"

// Require fails the test (never skips) when the cluster cannot run.
func Require(t testing.TB) string {
	t.Helper()
	bin := kubeletlab.Require(t)
	lab.RequireFRR(t)
	for _, f := range []string{"vipctl", "vipctl-image.tar", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "labprobe-image.tar"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("clusterlab needs bin/%s: run make deps image build (make test does): %v", f, err)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			t.Fatalf("clusterlab needs the CNI plugin %s: run hack/install-deps.sh (containernetworking-plugins): %v", p, err)
		}
	}
	return bin
}

// Start builds the cluster and waits until it serves: every node
// registered and Ready, every static pod's mirror pod present, the
// workloads ready and every Service given its addresses.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Profile == "" {
		o.Profile = v1alpha1.ProfileDefault
	}
	start := time.Now()
	c := &Cluster{t: t, bin: Require(t), dir: t.TempDir(), opts: o}
	c.Release = o.From
	if c.Release.Vipctl == "" {
		c.Release = ThisTree(c.bin)
	}
	c.Image = kubeletlab.ImageName(t, c.Release.Image)
	c.pki = newPKI(t)
	c.render(t)
	c.startNetwork(t)
	images := []string{c.Release.Image, filepath.Join(c.bin, "labprobe-image.tar")}
	var opts []kubeletlab.Options
	for _, s := range Nodes {
		disk, _ := splitSysctls(c.roleFiles[s.Role])
		opts = append(opts, kubeletlab.Options{
			Name: s.Name, Host: c.Lab.Host(s.Name), NodeIP: s.IP4, NodeIPs: []string{s.IP6},
			Files: append(disk, c.nodeFiles(t, s)...), Kubeconfig: c.pki.kubeletKubeconfig(t), Register: true,
			Images: images, Tags: map[string]string{BaseImage: c.Image},
		})
	}
	for i, kn := range kubeletlab.StartAll(t, opts) {
		c.Nodes = append(c.Nodes, &Node{Node: kn, Spec: Nodes[i]})
	}
	t.Cleanup(func() { kubeletlab.StopAll(c.kubeletNodes()) })
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs()
		}
	})
	t.Logf("clusterlab: %d nodes booted in %s", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	c.connectAdmin(t)
	c.WaitAPI(t, 10*time.Minute)
	t.Logf("clusterlab: API VIP answering %s after start", time.Since(start).Round(time.Millisecond))
	// What an installer applies with the cluster's first manifests, so
	// that the namespace of the mirror pods and the sidecars' RBAC exist
	// when the kubelets register: what the installed release rendered,
	// its MachineConfigs too.
	c.installOpenShiftAPIs(t)
	c.applyRendered(t, filepath.Join(c.dir, "out"), c.namespaces()...)
	c.labelNodes(t, 3*time.Minute)
	c.WaitNodesReady(t, 3*time.Minute)
	t.Logf("clusterlab: every node registered and Ready %s after start", time.Since(start).Round(time.Millisecond))
	lab.ApplyObjectsWithin(t, c.AdminConfig, c.workloads(), 2*time.Minute)
	c.WaitServing(t, 5*time.Minute)
	t.Logf("clusterlab: serving (workloads ready, every VIP answering) %s after start", time.Since(start).Round(time.Millisecond))
	return c
}

func (c *Cluster) kubeletNodes() []*kubeletlab.Node {
	out := make([]*kubeletlab.Node, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		out = append(out, n.Node)
	}
	return out
}

// Node returns a node by name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("clusterlab: no node %s", name)
	return nil
}

// Masters are the control-plane nodes.
func (c *Cluster) Masters() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Spec.Role == RoleMaster {
			out = append(out, n)
		}
	}
	return out
}

// Vipctl runs the installed release's vipctl with the administrator's
// kubeconfig, from the client's namespace (where the API VIP is
// reached, as from an administrator's machine).
func (c *Cluster) Vipctl(args ...string) (string, error) {
	return c.vipctlOf(c.Release, args...)
}

// vipctlOf is Vipctl with release r's vipctl.
func (c *Cluster) vipctlOf(r Release, args ...string) (string, error) {
	argv := append([]string{"netns", "exec", c.Client.NS, r.Vipctl}, args...)
	argv = append(argv, "--kubeconfig", c.Kubeconfig)
	out, err := exec.Command("ip", argv...).CombinedOutput()
	return string(out), err
}

// DumpLogs logs what a failing test needs: each node's kubelet and
// containerd, every container's log tail.
func (c *Cluster) DumpLogs() {
	keep := os.Getenv(KeepEnv)
	for _, n := range c.Nodes {
		if n.Running() {
			c.t.Logf("%s%s%s", n.Logs(15), n.ContainerLogs(15), daemonStates(n.Host.NS))
		}
		if keep != "" {
			dir := filepath.Join(keep, time.Now().Format("150405"), n.Name)
			if err := n.SaveLogs(dir); err != nil {
				c.t.Logf("saving %s's logs: %v", n.Name, err)
			} else {
				c.t.Logf("%s's logs saved in %s", n.Name, dir)
			}
		}
	}
}

// daemonStates tells what each keepalived process in netns is doing:
// a VRRP process that stopped advertising while its addresses stay
// (seen once: its log ended in the middle of a reload) shows here whether
// it is blocked and where, or spinning, and at which scheduling policy
// (keepalived raises itself to real time when its timers run late).
func daemonStates(netns string) string {
	out, err := exec.Command("ip", "netns", "pids", netns).Output()
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, pid := range strings.Fields(string(out)) {
		proc := "/proc/" + pid + "/"
		if comm, _ := os.ReadFile(proc + "comm"); strings.TrimSpace(string(comm)) != "keepalived" {
			continue
		}
		read := func(f string) string { v, _ := os.ReadFile(proc + f); return strings.TrimSpace(string(v)) }
		// stat fields after the command: state is the first, utime and
		// stime the 12th and 13th, policy the 39th.
		stat := read("stat")
		fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		pick := func(i int) string {
			if i < len(fields) {
				return fields[i]
			}
			return "?"
		}
		fmt.Fprintf(&b, "\n--- keepalived pid %s: state %s utime %s stime %s policy %s wchan %s syscall %s\n%s",
			pid, pick(0), pick(11), pick(12), pick(38), read("wchan"), read("syscall"), read("stack"))
	}
	return b.String()
}

// KeepEnv names a directory where a failing cluster test leaves every
// node's logs (kubelet, containerd, each container's).
const KeepEnv = "VIPCTL_LAB_KEEP"

// URL is http://addr:port/ with addr in brackets when it is IPv6.
func URL(addr string, port int) string {
	return "http://" + netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port)).String() + "/"
}

// ctx is the context of the lab's API calls: each bounded, so a stuck
// call fails a wait's try rather than the test.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("clusterlab: "+format, args...)
}
