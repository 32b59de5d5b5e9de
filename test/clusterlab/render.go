package clusterlab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/test/kubeletlab"
)

// ClusterYAML is the cluster file for vipctl's image image: dual-stack
// API and ingress VIPs, a vrrp pool of each announce mode and a bgp pool,
// every pool in both families. Only the vrrp pool assigns automatically;
// the others are asked for by name (vipctl.io/pool).
func ClusterYAML(image, profile string, bfd bool) string {
	bfdLine := ""
	if bfd {
		bfdLine = "\n        bfd: true"
	}
	peer := func(addr string) string {
		return fmt.Sprintf(`
      - address: %s
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s%s`, addr, bfdLine)
	}
	return fmt.Sprintf(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: %s
spec:
  baseDomain: %s
  machineNetworks: [%s, "%s"]
  api:
    vips: [%s, "%s"]
  ingress:
    - name: default
      vips: [%s, "%s"]
  servicePools:
    - name: %s
      addresses: [198.51.100.128/28, "2001:db8:100::1:0/124"]
    - name: %s
      addresses: [198.51.100.144/28, "2001:db8:100::2:0/124"]
      announce: sidecar
      autoAssign: false
    - name: %s
      mode: bgp
      addresses: [%s, "%s"]
      autoAssign: false
  bgp:
    asn: 64513
    peers:%s%s
  vrrp:
    profile: %s
  images:
    keepalived: %s
    haproxy: %s
    vipctl: %s
`, clusterName, baseDomain, machineNet4, machineNet6, APIVIP4, APIVIP6, IngressVIP4, IngressVIP6,
		PoolVRRP, PoolSidecar, PoolBGP, bgpPool4, bgpPool6, peer(TorIP4), peer(TorIP6), profile, image, image, image)
}

// nodeList is the cluster's nodes as `oc get nodes -o yaml` prints them,
// the bootstrap list `vipctl render --nodes` takes: what an administrator
// has before the first boot.
func nodeList(t testing.TB) []byte {
	t.Helper()
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, s := range Nodes {
		node := corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: roleLabels(s.Role)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: s.IP4}, {Type: corev1.NodeInternalIP, Address: s.IP6},
			}},
		}
		data, err := json.Marshal(node)
		if err != nil {
			t.Fatal(err)
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: data})
	}
	data, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// roleLabels are the labels a node of role carries: control-plane nodes
// are workers too (schedulable), as in a compact cluster.
func roleLabels(role string) map[string]string {
	if role == RoleMaster {
		return map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}
	}
	return map[string]string{"node-role.kubernetes.io/worker": ""}
}

// render does what an administrator does: writes the cluster file and
// the node list, runs `vipctl render`, and keeps each role's
// MachineConfig files, read from the Ignition config as the machine-config
// daemon reads them.
func (c *Cluster) render(t testing.TB) {
	t.Helper()
	c.ConfigPath = filepath.Join(c.dir, "cluster.yaml")
	if err := os.WriteFile(c.ConfigPath, []byte(ClusterYAML(c.Image, c.opts.Profile, c.opts.BFD)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.roleFiles = c.renderFiles(t, c.ConfigPath, filepath.Join(c.dir, "out"))
}

// renderFiles renders cfg into out and returns each role's MachineConfig
// files.
func (c *Cluster) renderFiles(t testing.TB, cfg, out string) map[string][]kubeletlab.File {
	t.Helper()
	nodes := filepath.Join(c.dir, "nodes.yaml")
	if err := os.WriteFile(nodes, nodeList(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(c.Release.Vipctl, "render", "-f", cfg, "--nodes", nodes, "--out-dir", out).CombinedOutput(); err != nil {
		t.Fatalf("vipctl render: %v\n%s", err, b)
	}
	files := map[string][]kubeletlab.File{}
	for _, role := range []string{RoleMaster, RoleWorker} {
		data, err := os.ReadFile(filepath.Join(out, "machineconfigs", bundle.MachineConfigName(role)+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if files[role], err = kubeletlab.MachineConfigFiles(data); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// sysctlDir holds the kernel settings a MachineConfig ships, which
// systemd-sysctl applies at boot: the lab applies them to the node's
// namespace (netlab.Host.ApplySysctl) instead of writing them.
const sysctlDir = "/etc/sysctl.d/"

// splitSysctls parts a MachineConfig's files into those laid on disk and
// the kernel settings.
func splitSysctls(files []kubeletlab.File) (disk, sysctls []kubeletlab.File) {
	for _, f := range files {
		if strings.HasPrefix(f.Path, sysctlDir) {
			sysctls = append(sysctls, f)
		} else {
			disk = append(disk, f)
		}
	}
	return disk, sysctls
}
