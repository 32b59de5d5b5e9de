package bundle

import (
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
)

// within tells whether p is base or lies under it.
func within(p, base string) bool {
	return p == base || strings.HasPrefix(p, strings.TrimSuffix(base, "/")+"/")
}

// TestLeavesOpenShiftsFilesAlone: on a cluster where OpenShift's own
// keepalived, haproxy and coredns run (mode poolsOnly) or lie disabled
// (a user-managed load balancer), nothing vipctl lays on a node or mounts
// into its pods is one of theirs: no file of the MachineConfigs and no
// host path of the static pods is, lies under or holds one of OpenShift's
// on-prem paths (fixture.OpenShiftNodePaths), no static pod shares a
// name with OpenShift's or runs in an openshift- namespace. And every
// path vipctl writes names vipctl, so the next one added cannot land on
// someone else's by accident.
func TestLeavesOpenShiftsFilesAlone(t *testing.T) {
	t.Parallel()
	for _, ex := range fixture.Examples(t) {
		c := fixture.Example(t, ex)
		for _, role := range Roles {
			// With a bootstrap node list, so its path is held too.
			files, err := RoleFiles(c, role, Options{BootstrapNodes: []corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "master-0", Labels: map[string]string{"node-role.kubernetes.io/master": ""}},
				Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}},
			}}})
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, f := range files {
				for _, os := range fixture.OpenShiftNodePaths {
					if within(f.Path, os) || within(os, f.Path) {
						t.Errorf("%s %s: the MachineConfig lays %s, OpenShift's %s", ex, role, f.Path, os)
					}
				}
				if !strings.Contains(f.Path, "vipctl") {
					t.Errorf("%s %s: the MachineConfig lays %s, a path that does not name vipctl", ex, role, f.Path)
				}
				if path.Dir(f.Path) != onnode.StaticPodDir {
					continue
				}
				var pod corev1.Pod
				if err := yaml.UnmarshalStrict(f.Data, &pod); err != nil {
					t.Fatalf("%s %s: %s: %v", ex, role, f.Path, err)
				}
				pods = append(pods, pod.Name)
				if slices.Contains(fixture.OpenShiftStaticPods, pod.Name) || strings.HasPrefix(pod.Namespace, "openshift-") {
					t.Errorf("%s %s: static pod %s/%s shares OpenShift's names", ex, role, pod.Namespace, pod.Name)
				}
				checkHostPaths(t, ex+" "+role+" "+pod.Name, &pod)
			}
			if c.PoolsOnly() && slices.Contains(pods, onnode.HaproxyPodName) {
				t.Errorf("%s %s: mode poolsOnly, yet vipctl's haproxy pod is laid down (OpenShift's fronts the API)", ex, role)
			}
			if !c.PoolsOnly() && role == "master" && !slices.Contains(pods, onnode.HaproxyPodName) {
				t.Errorf("%s %s: no haproxy pod in mode full", ex, role)
			}
		}
	}
}

// checkHostPaths fails for a host path of pod that collides with one of
// OpenShift's, and for one the pod may write that does not name vipctl
// (read-only ones are the kubelet's credentials).
func checkHostPaths(t *testing.T, what string, pod *corev1.Pod) {
	t.Helper()
	writable := map[string]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range cs {
			for _, m := range ctr.VolumeMounts {
				if !m.ReadOnly {
					writable[m.Name] = true
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		p := v.HostPath.Path
		for _, os := range fixture.OpenShiftNodePaths {
			if within(p, os) || within(os, p) {
				t.Errorf("%s: host path %s (volume %s) collides with OpenShift's %s", what, p, v.Name, os)
			}
		}
		if writable[v.Name] && !strings.Contains(p, "vipctl") {
			t.Errorf("%s: writes host path %s (volume %s), which does not name vipctl", what, p, v.Name)
		}
		if strings.Contains(what, "pools-only") && (p == onnode.HaproxyDir || p == onnode.HaproxyRunDir) {
			t.Errorf("%s: mounts haproxy's %s though no haproxy of vipctl's runs in mode poolsOnly", what, p)
		}
	}
}
