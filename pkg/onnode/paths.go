package onnode

import (
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Paths and ports on the node. The static pods, the MachineConfigs, the
// rendered configs and the sidecar all meet at these, so they are defined
// once here.
const (
	// StaticPodDir is where the kubelet picks up static pod manifests.
	StaticPodDir = "/etc/kubernetes/manifests"
	// ConfigDir holds what the MachineConfig lays down: the cluster file,
	// the bootstrap node list and the check scripts.
	ConfigDir = "/etc/vipctl"
	// ClusterConfigPath is the ClusterVIPs file the sidecar starts from.
	ClusterConfigPath = ConfigDir + "/cluster.yaml"
	// BootstrapNodesPath is the NodeList known at render time; it lets
	// `runtimecfg --once` render peers before any API server answers.
	BootstrapNodesPath = ConfigDir + "/nodes.yaml"
	// ScriptsDir holds the check scripts keepalived runs. It must not be
	// group- or world-writable or keepalived disables the scripts.
	ScriptsDir = ConfigDir + "/scripts"

	// KeepalivedDir and HaproxyDir hold the configs the sidecar renders:
	// vipctl's own, never /etc/keepalived and /etc/haproxy, where
	// OpenShift's on-prem keepalived and haproxy pods render theirs
	// (beside vipctl's on a cluster with OpenShift's default load
	// balancer) and the MCO lays files (test/fixture.OpenShiftNodePaths).
	KeepalivedDir      = "/etc/vipctl-keepalived"
	KeepalivedConfPath = KeepalivedDir + "/keepalived.conf"
	HaproxyDir         = "/etc/vipctl-haproxy"
	HaproxyConfPath    = HaproxyDir + "/haproxy.cfg"

	// RunDir is shared by the keepalived pod's containers (pid files, the
	// sidecar's state); the pod shares its process namespace so the sidecar
	// can signal keepalived by PID.
	RunDir            = "/run/vipctl"
	KeepalivedPIDFile = RunDir + "/keepalived.pid"
	VRRPPIDFile       = RunDir + "/vrrp.pid"
	CheckersPIDFile   = RunDir + "/checkers.pid"
	// SyncedFile exists while this node's sidecar has applied a render
	// from the live cluster since the keepalived pod started (a new pod's
	// init container removes it; /run empties at boot). Until then the
	// node renders at the lowest priority (WithHeldBack).
	SyncedFile          = RunDir + "/synced"
	HaproxyRunDir       = "/run/vipctl-haproxy"
	HaproxyMasterSocket = HaproxyRunDir + "/master.sock"
	HaproxyStatsSocket  = HaproxyRunDir + "/stats.sock"

	// StateDir keeps what must outlive the pods and a reboot: the
	// sidecar's last-known-good view of the cluster.
	StateDir = "/var/lib/vipctl"
	// LastGoodPath is that view (effective config and cluster state),
	// rewritten atomically after every successful sync. `runtimecfg
	// --once` starts from it when it is newer than the bootstrap node
	// list, so a restarted pod comes back with the Service VIPs it had.
	LastGoodPath = StateDir + "/last-good.json"

	// NodeKubeconfig is the kubelet's own credential; static pods cannot
	// use a ServiceAccount, so the sidecar reads with the node's identity.
	NodeKubeconfig = "/var/lib/kubelet/kubeconfig"

	// SidecarPort serves the sidecar's /healthz, /readyz and /metrics on
	// localhost. The numbers of the fixed node ports are defined in
	// v1alpha1 (nodeports.go), whose validation refuses a configured
	// port that clashes with one.
	SidecarPort = v1alpha1.SidecarProbePort
	// HaproxyStatsPort serves haproxy's stats page on localhost only.
	HaproxyStatsPort = v1alpha1.HaproxyStatsPort
	// KubeletServingCert is the kubelet's rotated serving certificate
	// and key in one file (serverTLSBootstrap, as on OpenShift), signed
	// by the CA the cluster's Prometheus already trusts for scraping the
	// kubelet: the sidecar serves its metrics with it.
	KubeletServingCert = KubeletPKIDir + "/kubelet-server-current.pem"

	// Namespace holds the static pods' mirror pods and the allocator.
	Namespace = "vipctl-system"
	// ScriptUser runs keepalived's check scripts (enable_script_security).
	ScriptUser = "keepalived_script"
)

// Static pod names. The kubelet names the mirror pods <name>-<node> in
// Namespace, which is where `vipctl status` looks for them.
const (
	KeepalivedPodName = "vipctl-keepalived"
	HaproxyPodName    = "vipctl-haproxy"
)

// KubeletPKIDir holds the client certificate NodeKubeconfig points at (it
// rotates, so the kubeconfig names a file rather than embedding it); the
// sidecar needs both to authenticate.
const KubeletPKIDir = "/var/lib/kubelet/pki"

// FRR, for bgp pools: the sidecar renders FRRConfPath and reloads bgpd
// through the vty sockets in FRRRunDir (frr-reload.py). These are the
// paths inside the containers, FRR's own defaults (so `vtysh` in a
// container needs no flags); on the node they are vipctl's directories
// HostFRRDir and HostFRRRunDir, so that an FRR the host may run itself
// keeps /etc/frr and /run/frr (Debian's are frr's, mode 0750, which the
// containers' root, holding no CAP_DAC_OVERRIDE, could not even read).
const (
	FRRDir        = "/etc/frr"
	FRRConfPath   = FRRDir + "/frr.conf"
	FRRRunDir     = "/run/frr"
	HostFRRDir    = StateDir + "/frr"
	HostFRRRunDir = RunDir + "/frr"
)

// NodePath is where a file the pods see at path lies on the node itself:
// the same path, but for FRR's directories, which the pods mount from
// vipctl's own (HostFRRDir, HostFRRRunDir). `vipctl render --nodes` lays
// each node's files out by it.
func NodePath(path string) string {
	for _, m := range [][2]string{{FRRDir, HostFRRDir}, {FRRRunDir, HostFRRRunDir}} {
		if rest, ok := strings.CutPrefix(path, m[0]+"/"); ok {
			return m[1] + "/" + rest
		}
	}
	return path
}

// SysctlPath holds the kernel settings the cluster's pools need on every
// node. systemd-sysctl applies it at boot, and its udev rule applies an
// interface's lines again whenever that interface appears (br-ex is
// created after boot).
const SysctlPath = "/etc/sysctl.d/50-vipctl.conf"
