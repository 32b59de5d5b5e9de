package manifests

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/golden"
)

var roles = []string{roleMaster, roleWorker}

func loadExample(t *testing.T, example string) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStaticPodsGolden pins the manifests of every example for each role.
func TestStaticPodsGolden(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		for _, role := range roles {
			t.Run(e+"/"+role, func(t *testing.T) {
				t.Parallel()
				files, err := StaticPodFiles(loadExample(t, e), role)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				for _, f := range files {
					fmt.Fprintf(&b, "### %s (%04o)\n%s\n", f.Path, f.Mode.Perm(), f.Data)
				}
				golden.Assert(t, strings.TrimSuffix(e, ".yaml")+"-"+role, b.Bytes())
			})
		}
	}
}

func TestStaticPodFilesPerRole(t *testing.T) {
	t.Parallel()
	c := loadExample(t, "compact-ipv4.yaml")
	want := map[string][]string{
		roleMaster: {onnode.StaticPodDir + "/vipctl-keepalived.yaml", onnode.StaticPodDir + "/vipctl-haproxy.yaml"},
		roleWorker: {onnode.StaticPodDir + "/vipctl-keepalived.yaml"},
	}
	for role, paths := range want {
		files, err := StaticPodFiles(c, role)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		var got []string
		for _, f := range files {
			got = append(got, f.Path)
			if f.Mode.Perm() != 0o644 {
				t.Errorf("%s: %s has mode %04o, want 0644", role, f.Path, f.Mode.Perm())
			}
		}
		if !slices.Equal(got, paths) {
			t.Errorf("%s: files %v, want %v", role, got, paths)
		}
	}
	if _, err := StaticPodFiles(c, "infra"); err == nil || !strings.Contains(err.Error(), `"infra"`) {
		t.Errorf("role infra: error %v, want one naming the role", err)
	}
}

// TestStaticPodsRoundTrip decodes what lands on the node, strictly, and
// expects the pod that was built: no field lost or misspelt on the way.
func TestStaticPodsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			c := loadExample(t, e)
			files, err := StaticPodFiles(c, roleMaster)
			if err != nil {
				t.Fatal(err)
			}
			clusterYAML, err := c.ShippedYAML()
			if err != nil {
				t.Fatal(err)
			}
			keepalived := KeepalivedPod(c)
			setClusterFileDigest(keepalived, clusterYAML)
			built := map[string]*corev1.Pod{
				onnode.StaticPodDir + "/" + onnode.KeepalivedPodName + ".yaml": keepalived,
				onnode.StaticPodDir + "/" + onnode.HaproxyPodName + ".yaml":    HaproxyPod(c),
			}
			for _, f := range files {
				var got corev1.Pod
				if err := yaml.UnmarshalStrict(f.Data, &got); err != nil {
					t.Fatalf("%s: %v", f.Path, err)
				}
				want := built[f.Path]
				if want == nil {
					t.Fatalf("unexpected file %s", f.Path)
				}
				if !equality.Semantic.DeepEqual(&got, want) {
					t.Errorf("%s does not decode to the pod it was built from:\n got: %+v\nwant: %+v", f.Path, got.Spec, want.Spec)
				}
			}
		})
	}
}

func TestStaticPodInvariants(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			c := loadExample(t, e)
			for _, p := range []*corev1.Pod{KeepalivedPod(c), HaproxyPod(c)} {
				checkPodBasics(t, p)
				checkMountsMatchVolumes(t, p)
				checkRenderContainer(t, c, p)
			}

			k := KeepalivedPod(c)
			if k.Spec.ShareProcessNamespace == nil || !*k.Spec.ShareProcessNamespace {
				t.Error("keepalived pod: shareProcessNamespace must be true, the sidecar signals keepalived by PID")
			}
			keepalived := container(t, k, containerKeepalived)
			if keepalived.Image != c.Spec.Images.Keepalived {
				t.Errorf("keepalived image %q, want %q", keepalived.Image, c.Spec.Images.Keepalived)
			}
			wantCaps := []corev1.Capability{"NET_ADMIN", "NET_RAW", "SETGID", "SETUID", "KILL", "SYS_NICE"}
			if got := keepalived.SecurityContext.Capabilities.Add; !slices.Equal(got, wantCaps) {
				t.Errorf("keepalived adds capabilities %v, want exactly %v", got, wantCaps)
			}
			if p := keepalived.LivenessProbe; p == nil || p.Exec == nil || !strings.Contains(strings.Join(p.Exec.Command, " "), "kill -0") ||
				!strings.Contains(strings.Join(p.Exec.Command, " "), onnode.KeepalivedPIDFile) {
				t.Errorf("keepalived liveness probe %+v, want kill -0 on %s", keepalived.LivenessProbe, onnode.KeepalivedPIDFile)
			}
			// Planned stops drain first, for three adverts and a second.
			wantDrain := fmt.Sprintf("echo 1 > %s && sleep %d", onnode.DrainFile, 4)
			if c.Spec.VRRP.Profile == v1alpha1.ProfileFast {
				wantDrain = fmt.Sprintf("echo 1 > %s && sleep %d", onnode.DrainFile, 2)
			}
			if l := keepalived.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Exec == nil || l.PreStop.Exec.Command[2] != wantDrain {
				t.Errorf("keepalived preStop %+v, want sh -c %q", keepalived.Lifecycle, wantDrain)
			}
			wantCmd := []string{"keepalived", "-n", "-l", "-D", "-G", "-f", onnode.KeepalivedConfPath,
				"-p", onnode.KeepalivedPIDFile, "-r", onnode.VRRPPIDFile, "-c", onnode.CheckersPIDFile}
			if !slices.Equal(keepalived.Command, wantCmd) {
				t.Errorf("keepalived command %q, want %q", keepalived.Command, wantCmd)
			}

			sidecar := container(t, k, containerRuntimecfg)
			if sidecar.Image != c.Spec.Images.Vipctl {
				t.Errorf("sidecar image %q, want %q", sidecar.Image, c.Spec.Images.Vipctl)
			}
			// The sidecar outlives keepalived's drain by a second, to
			// follow its anchors leaving.
			wantSidecarStop := fmt.Sprintf("sleep %d", 5)
			if c.Spec.VRRP.Profile == v1alpha1.ProfileFast {
				wantSidecarStop = fmt.Sprintf("sleep %d", 3)
			}
			if l := sidecar.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Exec == nil || l.PreStop.Exec.Command[2] != wantSidecarStop {
				t.Errorf("sidecar preStop %+v, want sh -c %q", sidecar.Lifecycle, wantSidecarStop)
			}
			// NET_ADMIN for the nftables redirect of VIP:6443 to haproxy;
			// SETGID and SETUID for keepalived --config-test, which checks
			// the track scripts as the script user; NET_RAW for the
			// announcements of the Service addresses it adds (announce:
			// sidecar). Nothing else.
			sidecarCaps := []corev1.Capability{"NET_ADMIN", "NET_RAW", "SETGID", "SETUID"}
			if got := sidecar.SecurityContext.Capabilities.Add; !slices.Equal(got, sidecarCaps) {
				t.Errorf("sidecar adds capabilities %v, want only %v", got, sidecarCaps)
			}
			if u := sidecar.SecurityContext.RunAsUser; u == nil || *u != 0 {
				t.Error("sidecar must run as root, keepalived's UID, to signal it without CAP_KILL")
			}
			for _, pr := range []struct {
				probe *corev1.Probe
				path  string
			}{{sidecar.LivenessProbe, "/healthz"}, {sidecar.ReadinessProbe, "/readyz"}} {
				want := corev1.HTTPGetAction{Host: "127.0.0.1", Path: pr.path, Port: intstr.FromInt32(onnode.SidecarPort), Scheme: corev1.URISchemeHTTP}
				if pr.probe == nil || pr.probe.HTTPGet == nil || !reflect.DeepEqual(*pr.probe.HTTPGet, want) {
					t.Errorf("sidecar probe for %s: %+v, want %+v", pr.path, pr.probe, want)
				}
			}
			wantArgs := []string{"runtimecfg", "--config", onnode.ClusterConfigPath, "--bootstrap-nodes", onnode.BootstrapNodesPath,
				"--node-name", "$(NODE_NAME)", "--kubeconfig", onnode.NodeKubeconfig, "--listen", fmt.Sprintf("127.0.0.1:%d", onnode.SidecarPort),
				// The probes stay on localhost; the metrics for the
				// cluster's Prometheus on every address, with the
				// kubelet's serving certificate.
				"--metrics-listen", fmt.Sprintf(":%d", c.Spec.MetricsPort()),
				"--metrics-cert", onnode.KubeletServingCert, "--metrics-key", onnode.KubeletServingCert}
			if !slices.Equal(sidecar.Args, wantArgs) {
				t.Errorf("sidecar args %q, want %q", sidecar.Args, wantArgs)
			}

			h := HaproxyPod(c)
			haproxy := container(t, h, containerHaproxy)
			if haproxy.Image != c.Spec.Images.Haproxy {
				t.Errorf("haproxy image %q, want %q", haproxy.Image, c.Spec.Images.Haproxy)
			}
			if len(haproxy.SecurityContext.Capabilities.Add) != 0 {
				t.Errorf("haproxy adds capabilities %v, want none", haproxy.SecurityContext.Capabilities.Add)
			}
			health := intstr.FromInt32(c.Spec.API.HealthPort)
			if p := haproxy.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port != health {
				t.Errorf("haproxy readiness probe %+v, want GET /readyz on %d", p, c.Spec.API.HealthPort)
			}
			if p := haproxy.LivenessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port != health {
				t.Errorf("haproxy liveness probe %+v, want TCP on %d", p, c.Spec.API.HealthPort)
			}
			wantCmd = []string{"haproxy", "-W", "-db", "-S", onnode.HaproxyMasterSocket + ",level,admin", "-f", onnode.HaproxyConfPath}
			if !slices.Equal(haproxy.Command, wantCmd) {
				t.Errorf("haproxy command %q, want %q", haproxy.Command, wantCmd)
			}
		})
	}
}

// TestStaticPodImagesFromConfig guards against a default image sneaking
// into the manifests: each image must be the one the config names.
func TestStaticPodImagesFromConfig(t *testing.T) {
	t.Parallel()
	c := loadExample(t, "compact-ipv4.yaml")
	c.Spec.Images = v1alpha1.Images{
		Keepalived: "registry.example.test/keepalived@sha256:1",
		Haproxy:    "registry.example.test/haproxy@sha256:2",
		Vipctl:     "registry.example.test/vipctl@sha256:3",
	}
	want := map[string]string{
		containerRender:     c.Spec.Images.Vipctl,
		containerRuntimecfg: c.Spec.Images.Vipctl,
		containerKeepalived: c.Spec.Images.Keepalived,
		containerHaproxy:    c.Spec.Images.Haproxy,
	}
	for _, p := range []*corev1.Pod{KeepalivedPod(c), HaproxyPod(c)} {
		for _, ctr := range allContainers(p) {
			if ctr.Image != want[ctr.Name] {
				t.Errorf("%s/%s: image %q, want %q", p.Name, ctr.Name, ctr.Image, want[ctr.Name])
			}
		}
	}
}

func checkPodBasics(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.APIVersion != "v1" || p.Kind != "Pod" {
		t.Errorf("%s: apiVersion/kind %s/%s, want v1/Pod", p.Name, p.APIVersion, p.Kind)
	}
	if p.Namespace != onnode.Namespace || p.Labels["app"] != p.Name {
		t.Errorf("%s: namespace %q labels %v, want namespace %q and app=%s", p.Name, p.Namespace, p.Labels, onnode.Namespace, p.Name)
	}
	if !p.Spec.HostNetwork {
		t.Errorf("%s: hostNetwork must be true", p.Name)
	}
	if p.Spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("%s: dnsPolicy %q, want Default", p.Name, p.Spec.DNSPolicy)
	}
	if p.Spec.PriorityClassName != "system-node-critical" {
		t.Errorf("%s: priorityClassName %q, want system-node-critical", p.Name, p.Spec.PriorityClassName)
	}
	for _, c := range allContainers(p) {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s/%s: must drop ALL capabilities", p.Name, c.Name)
			continue
		}
		if sc.Privileged == nil || *sc.Privileged {
			t.Errorf("%s/%s: must not be privileged", p.Name, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: must not allow privilege escalation", p.Name, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem must be read-only", p.Name, c.Name)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("%s/%s: CPU limit set; throttling causes false failovers", p.Name, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s/%s: CPU and memory requests must be set", p.Name, c.Name)
		}
	}
	for _, c := range p.Spec.Containers {
		if c.LivenessProbe == nil {
			t.Errorf("%s/%s: no liveness probe", p.Name, c.Name)
		}
	}
}

// checkMountsMatchVolumes: a mount without a volume is rejected by the
// kubelet, a volume without a mount is a host path exposed for nothing.
func checkMountsMatchVolumes(t *testing.T, p *corev1.Pod) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if volumes[v.Name] {
			t.Errorf("%s: volume %s defined twice", p.Name, v.Name)
		}
		volumes[v.Name] = false
	}
	for _, c := range allContainers(p) {
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s/%s: mount %s has no volume", p.Name, c.Name, m.Name)
			}
			volumes[m.Name] = true
		}
	}
	for name, used := range volumes {
		if !used {
			t.Errorf("%s: volume %s is mounted nowhere", p.Name, name)
		}
	}
}

func checkRenderContainer(t *testing.T, c *v1alpha1.ClusterVIPs, p *corev1.Pod) {
	t.Helper()
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("%s: %d init containers, want 1", p.Name, len(p.Spec.InitContainers))
	}
	ic := p.Spec.InitContainers[0]
	want := []string{"runtimecfg", "--once", "--config", onnode.ClusterConfigPath, "--bootstrap-nodes", onnode.BootstrapNodesPath, "--node-name", "$(NODE_NAME)"}
	// Only the keepalived pod's start ends a drain: a haproxy pod
	// restarting alone must not drop the routes of a handover in progress.
	if p.Name == onnode.HaproxyPodName {
		want = append(want, "--keep-drain")
	}
	if !slices.Equal(ic.Command, []string{"vipctl"}) || !slices.Equal(ic.Args, want) {
		t.Errorf("%s: init container runs %q %q, want vipctl %q", p.Name, ic.Command, ic.Args, want)
	}
	if ic.Image != c.Spec.Images.Vipctl {
		t.Errorf("%s: init image %q, want %q", p.Name, ic.Image, c.Spec.Images.Vipctl)
	}
	if len(ic.Env) != 1 || ic.Env[0].ValueFrom == nil || ic.Env[0].ValueFrom.FieldRef == nil || ic.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("%s: init env %+v, want NODE_NAME from spec.nodeName", p.Name, ic.Env)
	}
}

func container(t *testing.T, p *corev1.Pod, name string) corev1.Container {
	t.Helper()
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s: no container %s", p.Name, name)
	return corev1.Container{}
}

func allContainers(p *corev1.Pod) []corev1.Container {
	return append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...)
}

// TestNodePathFollowsMounts: onnode.NodePath, which lays out `vipctl
// render --nodes`'s per-node files, maps every path the pods mount to the
// host path it comes from (FRR's directories are not the node's /etc/frr
// and /run/frr).
func TestNodePathFollowsMounts(t *testing.T) {
	t.Parallel()
	c := loadExample(t, "bgp-two-racks.yaml")
	for _, p := range []*corev1.Pod{KeepalivedPod(c), HaproxyPod(c)} {
		hostPaths := map[string]string{}
		for _, v := range p.Spec.Volumes {
			if v.HostPath != nil {
				hostPaths[v.Name] = v.HostPath.Path
			}
		}
		for _, ct := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			for _, m := range ct.VolumeMounts {
				host, ok := hostPaths[m.Name]
				if !ok {
					continue
				}
				if got := onnode.NodePath(m.MountPath + "/x"); got != host+"/x" && onnode.NodePath(m.MountPath) != host {
					t.Errorf("%s/%s mounts %s from %s, but NodePath(%s/x) = %s", p.Name, ct.Name, m.MountPath, host, m.MountPath, got)
				}
			}
		}
	}
}
