package manifests

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Machine config pool roles StaticPodFiles knows.
const (
	roleMaster = "master"
	roleWorker = "worker"
)

const (
	// systemNodeCritical keeps the kubelet from evicting the pods under
	// node pressure: losing them moves VIPs or drops the API.
	systemNodeCritical = "system-node-critical"
	// loopback is where the sidecar serves its endpoints: only the kubelet
	// and keepalived's checks on this node need them.
	loopback = "127.0.0.1"
	// nodeNameEnv is filled from the downward API and expanded by the
	// kubelet in the args, so one manifest fits every node.
	nodeNameEnv = "NODE_NAME"

	containerRender     = "render"
	containerKeepalived = "keepalived"
	containerRuntimecfg = "runtimecfg"
	containerHaproxy    = "haproxy"
	containerFRR        = "frr"

	volConfig     = "config"
	volKeepalived = "keepalived"
	volHaproxy    = "haproxy"
	volRun        = "run"
	volHaproxyRun = "haproxy-run"
	volKubeconfig = "kubeconfig"
	volKubeletPKI = "kubelet-pki"
	volState      = "state"
	volTmp        = "tmp"
	volFRR        = "frr"
	volFRRRun     = "frr-run"
)

// manifestMode: the kubelet only reads static pod manifests.
const manifestMode = 0o644

// StaticPodFiles returns the manifests a node of the given role needs: role
// "master" gets both (only keepalived in mode poolsOnly), "worker" only
// keepalived.
func StaticPodFiles(c *v1alpha1.ClusterVIPs, role string) ([]onnode.File, error) {
	clusterYAML, err := c.ShippedYAML()
	if err != nil {
		return nil, err
	}
	kpod := KeepalivedPod(c)
	setClusterFileDigest(kpod, clusterYAML)
	var pods []*corev1.Pod
	switch role {
	case roleMaster:
		pods = []*corev1.Pod{kpod}
		if !c.PoolsOnly() { // else OpenShift's own haproxy fronts the API
			pods = append(pods, HaproxyPod(c))
		}
	case roleWorker:
		pods = []*corev1.Pod{kpod}
	default:
		return nil, fmt.Errorf("static pods: unknown role %q (want %q or %q)", role, roleMaster, roleWorker)
	}
	files := make([]onnode.File, 0, len(pods))
	for _, p := range pods {
		data, err := yaml.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("static pod %s: %w", p.Name, err)
		}
		files = append(files, onnode.File{Path: StaticPodPath(p.Name), Mode: manifestMode, Data: data})
	}
	return files, nil
}

// StaticPodPath is where the node's kubelet finds the static pod name
// (onnode.KeepalivedPodName, onnode.HaproxyPodName).
func StaticPodPath(name string) string { return onnode.StaticPodDir + "/" + name + ".yaml" }

// KeepalivedPod is the static pod on every node that may hold a VIP.
func KeepalivedPod(c *v1alpha1.ClusterVIPs) *corev1.Pod {
	return withoutHaproxy(c, withFRR(c, &corev1.Pod{
		TypeMeta:   podTypeMeta(),
		ObjectMeta: podMeta(onnode.KeepalivedPodName),
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			DNSPolicy:         corev1.DNSDefault,
			PriorityClassName: systemNodeCritical,
			// The sidecar finds keepalived by the PID keepalived wrote,
			// which only means something inside one PID namespace.
			ShareProcessNamespace: ptr.To(true),
			EnableServiceLinks:    ptr.To(false),
			SecurityContext:       podSecurityContext(),
			Tolerations:           tolerateEverything(),
			InitContainers:        []corev1.Container{renderContainer(c, false)},
			Containers:            []corev1.Container{keepalivedContainer(c), runtimecfgContainer(c)},
			Volumes: []corev1.Volume{
				hostPath(volConfig, onnode.ConfigDir, corev1.HostPathDirectory),
				hostPath(volKeepalived, onnode.KeepalivedDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volHaproxy, onnode.HaproxyDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volRun, onnode.RunDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volHaproxyRun, onnode.HaproxyRunDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volKubeconfig, onnode.NodeKubeconfig, corev1.HostPathFile),
				hostPath(volKubeletPKI, onnode.KubeletPKIDir, corev1.HostPathDirectory),
				hostPath(volState, onnode.StateDir, corev1.HostPathDirectoryOrCreate),
				tmpVolume(),
			},
		},
	}))
}

// keepalivedContainer runs keepalived in the keepalived pod.
func keepalivedContainer(c *v1alpha1.ClusterVIPs) corev1.Container {
	return corev1.Container{
		Name:      containerKeepalived,
		Image:     c.Spec.Images.Keepalived,
		Command:   keepalived.Args(""),
		Resources: requests("10m", "20Mi"),
		// The sidecar reloads keepalived through this PID file: if it is
		// gone or stale, reloads would go nowhere, and a restart rewrites it.
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"/bin/sh", "-c", `kill -0 "$(cat ` + onnode.KeepalivedPIDFile + `)"`},
			}},
			PeriodSeconds:    10,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
		},
		// A planned stop (MachineConfig rollout, drain, pod update) is
		// make-before-break: the drain file drops every instance to
		// priority 1, a peer preempts on this node's next advert while this
		// node still answers, and only then does keepalived get SIGTERM. The
		// sidecar sees the file change and keeps the VIPs local (drain
		// routes), so connections open at the move are still answered. The
		// next pod's init container resets the file and the routes.
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/sh", "-c", fmt.Sprintf("echo 1 > %s && sleep %d", onnode.DrainFile, drainSeconds(c))},
		}}},
		VolumeMounts: []corev1.VolumeMount{
			mount(volConfig, onnode.ConfigDir, true), // check scripts
			mount(volKeepalived, onnode.KeepalivedDir, true),
			mount(volRun, onnode.RunDir, false), // PID files
		},
		// NET_ADMIN adds and removes VIPs, NET_RAW sends VRRP and
		// gratuitous ARP/NA. SETUID and SETGID let keepalived run check
		// scripts as ScriptUser: without them keepalived 2.2 disables the
		// track scripts ("Unable to set uid:gid ... disabling") and holds
		// VIPs whatever their checks say. KILL lets keepalived stop a
		// check that outlives its timeout: the script runs as another
		// user, and without it the kill fails (EPERM, "kill -15 of process
		// ... failed with errno 1", seen on a loaded node), keepalived
		// waits up to 1000 s for the script to end by itself and skips
		// every run of that check meanwhile. SYS_NICE serves
		// max_auto_priority in keepalived.conf, which raises keepalived to
		// real-time priority when its adverts run late.
		SecurityContext: securityContext("NET_ADMIN", "NET_RAW", "SETGID", "SETUID", "KILL", "SYS_NICE"),
	}
}

// runtimecfgContainer runs the sidecar beside keepalived.
func runtimecfgContainer(c *v1alpha1.ClusterVIPs) corev1.Container {
	return corev1.Container{
		Name:    containerRuntimecfg,
		Image:   c.Spec.Images.Vipctl,
		Command: []string{"vipctl"},
		Args: append(append([]string{"runtimecfg"}, runtimecfgFlags()...),
			"--kubeconfig", onnode.NodeKubeconfig,
			"--listen", net.JoinHostPort(loopback, strconv.Itoa(onnode.SidecarPort)),
			// Every address: the cluster's Prometheus scrapes the node's.
			"--metrics-listen", fmt.Sprintf(":%d", c.Spec.MetricsPort()),
			"--metrics-cert", onnode.KubeletServingCert, "--metrics-key", onnode.KubeletServingCert,
		),
		// Declared, as a host-network port must be (the scheduler and
		// OpenShift's host port registry count on it), and named for the
		// metrics Service.
		Ports:         []corev1.ContainerPort{{Name: metricsPortName, ContainerPort: c.Spec.MetricsPort(), HostPort: c.Spec.MetricsPort(), Protocol: corev1.ProtocolTCP}},
		Env:           nodeNameEnvVar(),
		Resources:     requests("10m", "50Mi"),
		LivenessProbe: sidecarProbe("/healthz", 10, 3),
		// Asked every 2 s, so the pod is Ready about when the sidecar has
		// first synced (at 10 s a rebooted node's pod waited up to 10 s
		// more: the cluster lab's rolling upgrade, each node, 2026-11-30),
		// and NotReady after 30 s of failed syncs, as before.
		ReadinessProbe: sidecarProbe("/readyz", 2, 15),
		// A pod stop tells every container at once, and keepalived drains
		// in its preStop first (its anchors leave this node as the peers
		// preempt), then stops. The sidecar outlives both, as haproxy
		// does: it removes the Service addresses it added with an anchor
		// that left (announce: sidecar) and keeps the drained VIPs local,
		// which it cannot do once gone. Without it a replaced pod's node
		// kept a sidecar pool's Service address on its interface beside
		// the new holder's for 37 s (the cluster lab's in-place rollback,
		// 2026-11-29).
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", drainSeconds(c)+1)},
		}}},
		VolumeMounts: []corev1.VolumeMount{
			mount(volConfig, onnode.ConfigDir, true),
			mount(volKeepalived, onnode.KeepalivedDir, false),
			mount(volHaproxy, onnode.HaproxyDir, false),
			mount(volRun, onnode.RunDir, false),
			// Connecting to haproxy's master socket needs no write access
			// to the directory.
			mount(volHaproxyRun, onnode.HaproxyRunDir, true),
			mount(volKubeconfig, onnode.NodeKubeconfig, true),
			mount(volKubeletPKI, onnode.KubeletPKIDir, true),
			// The last-good view it records for the next pod's --once.
			mount(volState, onnode.StateDir, false),
			tmpMount(),
		},
		// The sidecar reloads keepalived with SIGHUP to the PID in its PID
		// file. Signalling a process of the same UID needs no capability,
		// so running as root like keepalived spares it CAP_KILL; the files
		// it rewrites and the kubelet's credentials are root's too.
		// NET_ADMIN installs the nftables redirect of VIP:6443 to haproxy
		// on control-plane nodes. SETUID and SETGID: the sidecar judges
		// every new keepalived.conf with `keepalived --config-test`, which
		// checks the track scripts as ScriptUser and, unable to switch to
		// it, rejects the config ("Disabling track script ... due to
		// insecure"); seen under the real kubelet (TestKubelet...).
		// NET_ADMIN also adds and removes the Service addresses of pools
		// with announce: sidecar, NET_RAW sends their gratuitous ARP and
		// neighbour advertisements (pkg/dataplane/follow.go), and opens
		// the packet socket that hears foreign routers' VRRP adverts
		// (pkg/sidecar/foreign.go).
		SecurityContext: securityContext(judgeCaps("NET_ADMIN", "NET_RAW")...),
	}
}

// withoutHaproxy takes haproxy's directories out of the keepalived pod in
// mode poolsOnly: no haproxy of vipctl's runs there, and the pod touches
// no host path it does not need.
func withoutHaproxy(c *v1alpha1.ClusterVIPs, p *corev1.Pod) *corev1.Pod {
	if !c.PoolsOnly() {
		return p
	}
	haproxy := func(name string) bool { return name == volHaproxy || name == volHaproxyRun }
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return haproxy(v.Name) })
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return haproxy(m.Name) })
		}
	}
	return p
}

// HaproxyPod is the static pod on control-plane nodes.
func HaproxyPod(c *v1alpha1.ClusterVIPs) *corev1.Pod {
	// No host: haproxy's health frontend binds every address of the
	// cluster's families, and the kubelet probes a host-network pod on the
	// node IP, which is always of one of them.
	health := intstr.FromInt32(c.Spec.API.HealthPort)
	ctr := corev1.Container{
		Name:      containerHaproxy,
		Image:     c.Spec.Images.Haproxy,
		Command:   haproxy.Args(""),
		Resources: requests("50m", "64Mi"),
		// Ready means at least one kube-apiserver behind it is up
		// (monitor-uri in haproxy.cfg); alive only needs the port.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: health, Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds:    5,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: health}},
			PeriodSeconds:    10,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
		},
		// Replaced in place (a new image under the node disruption
		// policy, docs/render.md) the kubelet replaces this pod and the
		// keepalived pod at once: haproxy keeps serving while keepalived's
		// preStop hands the API VIP to a peer, and only then stops. Without
		// it haproxy stopped at once on the VIP's holder and the API VIP
		// lost every request until the check script moved it (the cluster
		// lab's in-place rollback: 22 of 858).
		// An exec of sleep, not the kubelet's sleep action: that needs
		// Kubernetes 1.29 or later (OpenShift 4.16), and an older kubelet
		// would refuse the pod.
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep %d", drainSeconds(c)+1)},
		}}},
		VolumeMounts: []corev1.VolumeMount{
			mount(volHaproxy, onnode.HaproxyDir, true),
			mount(volHaproxyRun, onnode.HaproxyRunDir, false), // master and stats sockets
		},
		// Every port haproxy binds is above 1023, so it needs no
		// capability. Root only because the socket directory on the host
		// is root's and the sidecar, also root, must reach the sockets.
		SecurityContext: securityContext(),
	}
	return withFRR(c, &corev1.Pod{
		TypeMeta:   podTypeMeta(),
		ObjectMeta: podMeta(onnode.HaproxyPodName),
		Spec: corev1.PodSpec{
			HostNetwork:        true,
			DNSPolicy:          corev1.DNSDefault,
			PriorityClassName:  systemNodeCritical,
			EnableServiceLinks: ptr.To(false),
			SecurityContext:    podSecurityContext(),
			Tolerations:        tolerateEverything(),
			// Same render as in the keepalived pod: whichever pod starts
			// first after boot finds haproxy.cfg written, and a second
			// `--once` rewrites identical files. Only the keepalived pod's
			// start ends a drain.
			InitContainers: []corev1.Container{renderContainer(c, true)},
			Containers:     []corev1.Container{ctr},
			Volumes: []corev1.Volume{
				hostPath(volConfig, onnode.ConfigDir, corev1.HostPathDirectory),
				hostPath(volKeepalived, onnode.KeepalivedDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volHaproxy, onnode.HaproxyDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volRun, onnode.RunDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volHaproxyRun, onnode.HaproxyRunDir, corev1.HostPathDirectoryOrCreate),
				hostPath(volState, onnode.StateDir, corev1.HostPathDirectoryOrCreate),
				tmpVolume(),
			},
		},
	})
}

// withFRR gives a pod what bgp pools need when spec.bgp is set (a
// cluster without it gets exactly the pods it had). Every container that
// renders (the init containers and the sidecar) writes frr.conf: the
// init container of either pod may run first after a boot, and its
// root filesystem is read-only. The keepalived pod runs FRR itself: the
// frr container (`vipctl frr`: zebra, bfdd, bgpd), whose vty sockets in
// FRRRunDir the sidecar reaches to apply a new frr.conf (frr-reload.py)
// without resetting a session. Host paths, as for keepalived, but
// vipctl's own (onnode.HostFRRDir, HostFRRRunDir): `vtysh --vty_socket
// /run/vipctl/frr` on the node reaches the same daemons.
func withFRR(c *v1alpha1.ClusterVIPs, p *corev1.Pod) *corev1.Pod {
	if c.Spec.BGP == nil {
		return p
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			switch cs[i].Name {
			case containerRender:
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount(volFRR, onnode.FRRDir, false))
			case containerRuntimecfg:
				// Connecting to a socket needs no write access to its
				// directory; the sockets are group frrvty's, which root
				// is in (the image's /etc/group), since the sidecar has
				// no CAP_DAC_OVERRIDE.
				cs[i].VolumeMounts = append(cs[i].VolumeMounts,
					mount(volFRR, onnode.FRRDir, false), mount(volFRRRun, onnode.FRRRunDir, true))
			}
		}
	}
	p.Spec.Volumes = append(p.Spec.Volumes, hostPath(volFRR, onnode.HostFRRDir, corev1.HostPathDirectoryOrCreate))
	if p.Name != onnode.KeepalivedPodName {
		return p
	}
	p.Spec.Volumes = append(p.Spec.Volumes, hostPath(volFRRRun, onnode.HostFRRRunDir, corev1.HostPathDirectoryOrCreate))
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
		Name:      containerFRR,
		Image:     c.Spec.Images.Vipctl,
		Command:   []string{"vipctl"},
		Args:      []string{"frr"},
		Resources: requests("10m", "50Mi"),
		// Alive while bgpd answers on its vty socket; vipctl frr also
		// exits when any daemon does.
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"vtysh", "--vty_socket", onnode.FRRRunDir, "-d", "bgpd", "-c", "show version"},
			}},
			InitialDelaySeconds: 10,
			PeriodSeconds:       10,
			TimeoutSeconds:      5,
			FailureThreshold:    3,
		},
		VolumeMounts: []corev1.VolumeMount{
			mount(volFRR, onnode.FRRDir, true),
			mount(volFRRRun, onnode.FRRRunDir, false), // sockets, pid files
			// zebra's crash log and per-thread log buffers.
			mount(volTmp, "/var/tmp", false),
		},
		// The daemons start as root and drop to user frr (SETUID,
		// SETGID), keeping only the capabilities each asks for, which
		// must be in the container's set or the daemon refuses to start:
		// zebra NET_ADMIN, NET_RAW and SYS_ADMIN (network namespaces for
		// VRFs, asked for whether used or not), bgpd NET_BIND_SERVICE
		// (port 179) and NET_RAW, bfdd NET_RAW. CHOWN: vipctl frr hands
		// FRRRunDir to user frr. KILL: vipctl frr (root) stops the
		// daemons, which run as user frr then; without it each SIGTERM
		// failed (EPERM, unseen), and the kubelet killed the container
		// 30 s after every pod stop (the cluster lab's rollback: the
		// frr containers were the last of each replaced pod).
		SecurityContext: securityContext("NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE", "SYS_ADMIN", "SETUID", "SETGID", "CHOWN", "KILL"),
	})
	return p
}

// renderContainer writes this node's configs from the files the
// MachineConfig laid down, so keepalived and haproxy start with a valid
// config even before any API server answers. keepDrain leaves a drain in
// place (the haproxy pod).
func renderContainer(c *v1alpha1.ClusterVIPs, keepDrain bool) corev1.Container {
	args := append([]string{"runtimecfg", "--once"}, runtimecfgFlags()...)
	if keepDrain {
		args = append(args, "--keep-drain")
	}
	return corev1.Container{
		Name:      containerRender,
		Image:     c.Spec.Images.Vipctl,
		Command:   []string{"vipctl"},
		Args:      args,
		Env:       nodeNameEnvVar(),
		Resources: requests("10m", "50Mi"),
		VolumeMounts: []corev1.VolumeMount{
			mount(volConfig, onnode.ConfigDir, true),
			mount(volKeepalived, onnode.KeepalivedDir, false),
			mount(volHaproxy, onnode.HaproxyDir, false),
			mount(volRun, onnode.RunDir, false),
			// The sidecar's last-good view: a restart renders what the
			// node last served, Service addresses included.
			mount(volState, onnode.StateDir, true),
			tmpMount(),
		},
		// NET_ADMIN: the API redirect, before the API is up; and what
		// judging keepalived.conf takes, as in the sidecar.
		SecurityContext: securityContext(judgeCaps("NET_ADMIN")...),
	}
}

// drainSeconds is how long a draining keepalived keeps running: three
// advert intervals for a peer to preempt and send its gratuitous ARPs,
// plus a second of margin.
func drainSeconds(c *v1alpha1.ClusterVIPs) int {
	return int(math.Ceil((3*c.Spec.VRRP.Advert() + time.Second).Seconds()))
}

// runtimecfgFlags are the flags the render container and the sidecar share.
func runtimecfgFlags() []string {
	return []string{
		"--config", onnode.ClusterConfigPath,
		"--bootstrap-nodes", onnode.BootstrapNodesPath,
		"--node-name", "$(" + nodeNameEnv + ")",
	}
}

func nodeNameEnvVar() []corev1.EnvVar {
	return []corev1.EnvVar{{
		Name: nodeNameEnv,
		ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"},
		},
	}}
}

// sidecarProbe asks the sidecar on loopback: without a host the kubelet
// would probe a host-network pod on the node IP, where it does not listen.
// It asks every period seconds and fails after failures in a row.
func sidecarProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host:   loopback,
			Path:   path,
			Port:   intstr.FromInt32(onnode.SidecarPort),
			Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   2,
		FailureThreshold: failures,
	}
}

// requests reserves CPU and memory but sets no limit: a CPU-throttled VRRP
// speaker misses its adverts and its peers take over the VIP (a false
// failover), and an OOM kill would do the same.
func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// securityContext drops every capability but the ones named and keeps the
// root filesystem read-only: everything a container writes lives on a
// host path.
// Every container runs as root: keepalived and haproxy need it, and the
// sidecar signals keepalived, which only the same uid may do without
// CAP_KILL.
func securityContext(add ...corev1.Capability) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr.To(int64(0)),
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add},
	}
}

func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// tolerateEverything keeps the mirror pods from being evicted for a
// NoExecute taint: the kubelet would keep running the static pod, but its
// status would vanish from the API.
func tolerateEverything() []corev1.Toleration {
	return []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

func podTypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
}

func podMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: onnode.Namespace,
		Labels:    map[string]string{"app": name},
	}
}

// mount puts a host path at the same path in the container, so the paths
// in the configs hold on both sides.
func mount(volume, path string, readOnly bool) corev1.VolumeMount {
	return corev1.VolumeMount{Name: volume, MountPath: path, ReadOnly: readOnly}
}

// judgeCaps adds to caps what `keepalived --config-test` needs to check
// the track scripts as ScriptUser: SETUID and SETGID.
func judgeCaps(caps ...corev1.Capability) []corev1.Capability {
	return append(caps, "SETGID", "SETUID")
}

// tmpVolume is the /tmp of the containers that judge configs: the root
// filesystem is read-only, and keepalived --config-test and haproxy -c read
// their candidate files from a temporary directory (pkg/configcheck).
// In memory, since the files are small and gone with the pod.
func tmpVolume() corev1.Volume {
	return corev1.Volume{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
}

func tmpMount() corev1.VolumeMount { return mount(volTmp, "/tmp", false) }

func hostPath(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{
		Name: name,
		VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)},
		},
	}
}
