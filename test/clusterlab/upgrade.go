package clusterlab

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
)

// rebootGrace is how long a node's containers may take to end on
// SIGTERM when it reboots: the apiserver's shutdown delay and drain, with
// room for the loaded cores.
const rebootGrace = 10 * time.Second

// Upgrade is vipctl's move to another release, as docs/upgrade.md tells
// an administrator to make it: the new image made pullable, the cluster
// file's spec.images set to it, and the new release's `vipctl update`
// (its plan read first with --dry-run) writing the cluster's objects (the
// ConfigMap, RBAC, the allocator, which rolls) and the MachineConfigs,
// which the machine-config daemon lays down node by node (UpdateNode:
// the lab plays it from the MachineConfigs in the API).
type Upgrade struct {
	c *Cluster
	// To is the release moved to; Image its image's name, ConfigPath the
	// new cluster file.
	To         Release
	Image      string
	ConfigPath string
	roleFiles  map[string][]kubeletlab.File
}

// StartUpgrade moves the cluster's objects to release to and makes its
// image pullable on every node (imported into each node's containerd, as
// a registry serves it). The nodes run the old static pods until
// UpdateNode.
func (c *Cluster) StartUpgrade(t testing.TB, to Release) *Upgrade {
	t.Helper()
	u := &Upgrade{c: c, To: to, Image: kubeletlab.ImageName(t, to.Image), ConfigPath: filepath.Join(c.dir, "cluster-"+strings.ReplaceAll(to.Name, " ", "-")+".yaml")}
	if u.Image == c.Image {
		t.Fatalf("%s is the running image %s", to, c.Image)
	}
	if err := os.WriteFile(u.ConfigPath, []byte(ClusterYAML(u.Image, c.opts.Profile, c.opts.BFD)), 0o644); err != nil {
		t.Fatal(err)
	}
	// One node after the other. Nodes pull at once from a registry, each
	// on its own cores; here four containerds unpacking at once starved
	// the cluster's two shared cores: in two of five runs (2026-11-30)
	// VRRP instances failed over during the import and a request failed
	// later in the roll (a client's neighbour entry left on a node that
	// no longer held the address).
	began := time.Now()
	for _, n := range c.Nodes {
		if err := n.ImportImage(to.Image); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s imported on every node in %s", to.Image, time.Since(began).Round(time.Millisecond))
	plan, err := c.vipctlOf(to, "update", "-f", u.ConfigPath, "--dry-run")
	if err != nil {
		c.DumpLogs()
		fatalf(t, "%s: vipctl update --dry-run: %v\n%s", to, err, plan)
	}
	t.Logf("%s: vipctl update --dry-run:\n%s", to, plan)
	out, err := c.vipctlOf(to, "update", "-f", u.ConfigPath)
	if err != nil {
		c.DumpLogs()
		fatalf(t, "%s: vipctl update: %v\n%s", to, err, out)
	}
	t.Logf("%s: vipctl update:\n%s", to, out)
	c.waitDeployment(t, onnode.Namespace, manifests.AllocatorName, 3*time.Minute)
	u.roleFiles = c.machineConfigFiles(t)
	return u
}

// UpdateNode applies the new MachineConfig to one node the way the
// machine-config daemon does, with vipctl's step of docs/operations.md
// before it: the node cordoned, `vipctl drain NODE --wait` (and, on the
// previous release, docs/upgrade.md's wait for its bgp backups), its pods
// evicted (PodDisruptionBudgets respected, as oc adm drain does), the
// new files written, the node rebooted (containerd and the kubelet start
// again from its disk), and once it is Ready with every static pod
// Ready, uncordoned and `vipctl undrain`ed; it returns when the cluster
// has settled (every VIP held once), so the next node may go.
func (u *Upgrade) UpdateNode(t testing.TB, n *Node) {
	t.Helper()
	c := u.c
	began := time.Now()
	step := func(what string) {
		t.Logf("%s upgrade %s: %s (%s)", time.Now().Format("15:04:05.000"), n.Name, what, time.Since(began).Round(time.Millisecond))
	}
	c.setUnschedulable(t, n, true)
	if out, err := c.Vipctl("drain", n.Name, "--wait", "--timeout", "2m"); err != nil {
		c.DumpLogs()
		fatalf(t, "vipctl drain %s --wait: %v\n%s", n.Name, err, out)
	}
	step("cordoned, VIPs drained")
	if c.Release.Name != ThisTree("").Name {
		// docs/upgrade.md, step 6: a node on the previous release turns
		// its bgp routes into backups only after its bgpd's route-map
		// delay (5-12 s after the drain), and a Local Service's pod
		// evicted before that can end while the router still sends the
		// node its connections (rehearsal r53, 2026-12-02).
		time.Sleep(previousBGPDrain)
		step("waited for the previous release's bgp backups")
	}
	c.evictPods(t, n, 3*time.Minute)
	step("pods evicted")
	disk, _ := splitSysctls(u.roleFiles[n.Spec.Role])
	for _, f := range disk {
		if err := n.WriteFile(f.Path, f.Mode, f.Data); err != nil {
			t.Fatalf("%s: %s: %v", n.Name, f.Path, err)
		}
	}
	n.Shutdown(rebootGrace)
	step("files written, shut down")
	c.bootNode(t, n)
	c.waitNodePods(t, n, u.Image, 5*time.Minute)
	step("booted, Ready, its static pods Ready on the new image")
	c.setUnschedulable(t, n, false)
	if out, err := c.Vipctl("undrain", n.Name); err != nil {
		fatalf(t, "vipctl undrain %s: %v\n%s", n.Name, err, out)
	}
	c.Settle(t, 5*time.Minute)
	step("uncordoned, undrained, settled")
}

// previousBGPDrain is how long docs/upgrade.md has an administrator wait
// after `vipctl drain --wait` of a node still on the previous release,
// before its pods are evicted.
const previousBGPDrain = 10 * time.Second

// UpdateNodeInPlace applies the new MachineConfig to one node the way
// the machine-config daemon does under vipctl's node disruption policy
// (OpenShift 4.17 and later, docs/render.md): the files written, nothing
// cordoned, drained or rebooted; the kubelet replaces the static pods
// whose manifests changed, keepalived's preStop handing the node's VIPs
// to a peer first. It returns when the node's pods run the new image,
// Ready, and the cluster has settled, so the next node may go.
func (u *Upgrade) UpdateNodeInPlace(t testing.TB, n *Node) {
	t.Helper()
	began := time.Now()
	disk, sysctls := splitSysctls(u.roleFiles[n.Spec.Role])
	_, running := splitSysctls(u.c.roleFiles[n.Spec.Role])
	if !slices.EqualFunc(sysctls, running, sameFile) {
		t.Fatalf("%s: the kernel settings changed: the policy reboots for those (docs/render.md)", n.Name)
	}
	for _, f := range disk {
		if err := n.WriteFile(f.Path, f.Mode, f.Data); err != nil {
			t.Fatalf("%s: %s: %v", n.Name, f.Path, err)
		}
	}
	u.c.waitNodePods(t, n, u.Image, 5*time.Minute)
	t.Logf("%s upgrade %s in place: files written, static pods replaced (%s)", time.Now().Format("15:04:05.000"), n.Name, time.Since(began).Round(time.Millisecond))
	u.c.Settle(t, 5*time.Minute)
	t.Logf("%s upgrade %s in place: settled (%s)", time.Now().Format("15:04:05.000"), n.Name, time.Since(began).Round(time.Millisecond))
}

func sameFile(a, b kubeletlab.File) bool {
	return a.Path == b.Path && a.Mode == b.Mode && string(a.Data) == string(b.Data)
}

// Finish makes the new release, cluster file and image the cluster's,
// once every node runs it.
func (u *Upgrade) Finish() {
	u.c.ConfigPath, u.c.Image, u.c.roleFiles, u.c.Release = u.ConfigPath, u.Image, u.roleFiles, u.To
}

// setUnschedulable cordons or uncordons the node (kubectl cordon).
func (c *Cluster) setUnschedulable(t testing.TB, n *Node, on bool) {
	t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordon %s (%t): %v", n.Name, on, err)
	}
}

// evictPods evicts the node's pods as `oc adm drain` does: every pod but
// the mirror pods of static pods, by the Eviction API (a
// PodDisruptionBudget that allows none now is asked again), and waits
// until they are gone.
func (c *Cluster) evictPods(t testing.TB, n *Node, timeout time.Duration) {
	t.Helper()
	var left []string
	if !lab.WaitUntil(timeout, func() bool {
		ctx, cancel := callCtx()
		defer cancel()
		pods, err := c.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return false
		}
		left = nil
		for _, p := range pods.Items {
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			if p.DeletionTimestamp != nil {
				continue
			}
			err := c.Admin.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			if err != nil && !apierrors.IsTooManyRequests(err) && !apierrors.IsNotFound(err) {
				t.Logf("evicting %s/%s: %v", p.Namespace, p.Name, err)
			}
		}
		return len(left) == 0
	}) {
		c.DumpLogs()
		fatalf(t, "%s: pods not evicted within %s: %v", n.Name, timeout, left)
	}
}

// waitNodePods waits until the node is Ready and every static pod of its
// (vipctl's, and a control-plane node's etcd and apiserver) is Ready,
// vipctl's running image.
func (c *Cluster) waitNodePods(t testing.TB, n *Node, image string, timeout time.Duration) {
	t.Helper()
	want := []string{onnode.KeepalivedPodName}
	if n.Spec.Role == RoleMaster {
		want = append(want, onnode.HaproxyPodName, EtcdPod, APIServerPod)
	}
	var problems []string
	// What is still missing, logged as it changes: where a slow step of
	// a roll spends its time.
	said := ""
	if !lab.WaitUntil(timeout, func() bool {
		if now := strings.Join(problems, "; "); now != said && now != "" {
			t.Logf("%s %s: waiting for %s", time.Now().Format("15:04:05.000"), n.Name, now)
			said = now
		}
		problems = nil
		pods, err := n.Pods(t.Context())
		if err != nil {
			problems = append(problems, err.Error())
			return false
		}
		for _, name := range want {
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == name+"-"+n.Name })
			switch {
			case i < 0:
				problems = append(problems, "no pod "+name)
			case !kubeletlab.PodReady(&pods[i]):
				problems = append(problems, name+" not Ready: "+kubeletlab.ContainerStates(&pods[i]))
			case name == onnode.KeepalivedPodName || name == onnode.HaproxyPodName:
				for _, ct := range pods[i].Spec.Containers {
					if ct.Image != image {
						problems = append(problems, fmt.Sprintf("%s/%s runs %s", name, ct.Name, ct.Image))
					}
				}
			}
		}
		if len(problems) > 0 {
			return false
		}
		// Its pods Ready, a control-plane node redirects the API VIP's
		// port to haproxy: written once haproxy listened (after a boot
		// the redirect waits for it, docs/runtimecfg.md).
		if n.Spec.Role == RoleMaster {
			if has, err := dataplane.HasRedirects(host.Target{Netns: n.Host.NS}); err != nil || !has {
				problems = append(problems, fmt.Sprintf("no API redirect to haproxy (%v)", err))
				return false
			}
		}
		ctx, cancel := callCtx()
		defer cancel()
		node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || !nodeReady(node) {
			problems = append(problems, "Node not Ready")
			return false
		}
		return true
	}) {
		c.DumpLogs()
		fatalf(t, "%s not back within %s: %v", n.Name, timeout, problems)
	}
}
