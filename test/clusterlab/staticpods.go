package clusterlab

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/kubeletlab"
)

// Static pods of the cluster's own components, by manifest name.
const (
	EtcdPod           = "etcd"
	APIServerPod      = "kube-apiserver"
	ControllerMgrPod  = "kube-controller-manager"
	SchedulerPod      = "kube-scheduler"
	KubeProxyPod      = "kube-proxy"
	componentNS       = "kube-system"
	etcdDataDir       = "/var/lib/etcd"
	kubernetesDir     = "/etc/kubernetes"
	etcdClientPort    = 2379
	etcdPeerPort      = 2380
	apiServerPort     = 6443
	kubeProxyHealthz  = 10256
	controllerMgrPort = 10257
	schedulerPort     = 10259
)

// componentCPU are the components' CPU requests, about kubeadm's. They
// matter here more than anywhere: a pod without requests is BestEffort,
// whose cgroup gets the least CPU weight there is (cpu.shares 2 under
// cgroup v1), so on two shared cores the kubelets, containerds and every
// other pod took the CPU from etcd and the apiservers: etcd's applies
// took seconds, the apiservers failed /readyz, haproxy lost every
// backend and the API VIP went down with them, as on an overloaded node
// whose control plane asks for nothing.
var componentCPU = map[string]string{
	EtcdPod:          "200m",
	APIServerPod:     "250m",
	ControllerMgrPod: "100m",
	SchedulerPod:     "50m",
	KubeProxyPod:     "50m",
}

// ManifestPath is where a static pod's manifest lies on a node.
func ManifestPath(pod string) string { return onnode.StaticPodDir + "/" + pod + ".yaml" }

// componentPod is a static pod of a Kubernetes component: vipctl's image
// under BaseImage, the binary from bin/ (mounted at binDir), the node's
// /etc/kubernetes read-only, the host network.
func (c *Cluster) componentPod(name string, args []string, probe *corev1.Probe, extra ...corev1.Volume) *corev1.Pod {
	cpu, ok := componentCPU[name]
	if !ok {
		panic("clusterlab: no CPU request for " + name)
	}
	vols := append([]corev1.Volume{
		hostPathVolume("lab-bin", c.bin),
		hostPathVolume("kubernetes", kubernetesDir),
	}, extra...)
	mounts := []corev1.VolumeMount{
		{Name: "lab-bin", MountPath: binDir, ReadOnly: true},
		{Name: "kubernetes", MountPath: kubernetesDir, ReadOnly: true},
	}
	for _, v := range extra {
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: v.HostPath.Path})
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: componentNS, Labels: map[string]string{"component": name, "tier": "control-plane"}},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            name,
				Image:           BaseImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         append([]string{binDir + "/" + name}, args...),
				ReadinessProbe:  probe,
				VolumeMounts:    mounts,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("100Mi")}},
				// The image's user is nobody; the components read keys
				// only root may read.
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(0))},
			}},
			Volumes: vols,
		},
	}
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}
}

func httpProbe(scheme corev1.URIScheme, port int, path string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: path, Scheme: scheme}},
		PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 3,
	}
}

// etcdPod is one member of the three-member etcd: plain HTTP between
// the node namespaces (the lab's segment is its own), the data on the
// node's disk, so a rebooted member rejoins with it.
func (c *Cluster) etcdPod(s NodeSpec) *corev1.Pod {
	var initial []string
	for _, m := range Nodes {
		if m.Role == RoleMaster {
			initial = append(initial, fmt.Sprintf("%s=http://%s:%d", m.Name, m.IP4, etcdPeerPort))
		}
	}
	return c.componentPod(EtcdPod, []string{
		"--name=" + s.Name,
		"--data-dir=" + etcdDataDir,
		fmt.Sprintf("--listen-client-urls=http://%s:%d,http://127.0.0.1:%d", s.IP4, etcdClientPort, etcdClientPort),
		fmt.Sprintf("--advertise-client-urls=http://%s:%d", s.IP4, etcdClientPort),
		fmt.Sprintf("--listen-peer-urls=http://%s:%d", s.IP4, etcdPeerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://%s:%d", s.IP4, etcdPeerPort),
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=vipctl-lab",
		// Durability is worth nothing in a lab whose disk is a temporary
		// directory, and fsync on a shared disk stalls the members.
		"--unsafe-no-fsync",
		// Raft's timers for a member that waits for a core: at the default
		// 100 ms heartbeat and 1 s election the members, starved on two
		// shared cores (round trips of 800 ms measured), elected leaders
		// over and over and the apiservers never got ready. A lost leader
		// now costs up to 5 s of writes (docs/lab.md).
		"--heartbeat-interval=500",
		"--election-timeout=5000",
		"--log-level=warn",
	}, httpProbe(corev1.URISchemeHTTP, etcdClientPort, "/health"), hostPathVolume("etcd-data", etcdDataDir))
}

// apiServerPod serves on every address of the node at 6443 (haproxy's
// backends are the nodes' addresses), with the Node authorizer and
// NodeRestriction, dual-stack ClusterIPs, and etcd through the node's own
// member first.
func (c *Cluster) apiServerPod(s NodeSpec) *corev1.Pod {
	servers := []string{fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)}
	for _, m := range Nodes {
		if m.Role == RoleMaster && m.Name != s.Name {
			servers = append(servers, fmt.Sprintf("http://%s:%d", m.IP4, etcdClientPort))
		}
	}
	p := c.componentPod(APIServerPod, []string{
		"--advertise-address=" + s.IP4,
		"--bind-address=::",
		fmt.Sprintf("--secure-port=%d", apiServerPort),
		"--etcd-servers=" + strings.Join(servers, ","),
		"--tls-cert-file=" + apiserverCertFile,
		"--tls-private-key-file=" + apiserverKeyFile,
		"--client-ca-file=" + caFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPubFile,
		"--service-account-signing-key-file=" + saKeyFile,
		"--service-cluster-ip-range=" + serviceCIDR4 + "," + serviceCIDR6,
		"--allow-privileged=true",
		"--kubelet-preferred-address-types=InternalIP",
		// On SIGTERM /readyz fails at once and the apiserver keeps serving
		// for this long, so haproxy's checks take it out before it closes
		// its port (OpenShift waits longer, for slower load balancers).
		"--shutdown-delay-duration=3s",
		// After the delay it keeps listening, answers new requests 429
		// with Retry-After and Connection: close until those in flight are
		// done, then gives its open connections (watches) 2 s, as
		// OpenShift's kube-apiserver runs (cluster-kube-apiserver-operator's
		// defaultconfig.yaml, c813e82, 2026-08-21). Without it a stop
		// waited up to a minute for watches to go idle.
		"--shutdown-send-retry-after=true",
		// Less work on two shared cores: no request fairness queues, no
		// profiling endpoints.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--v=1",
	}, httpProbe(corev1.URISchemeHTTPS, apiServerPort, "/readyz"))
	// A grace of 10 s was tried (2026-11-27) while a failure of the
	// rolling upgrade that followed was not yet understood; it stays 30
	// until that is.
	p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30))
	return p
}

func (c *Cluster) controllerManagerPod() *corev1.Pod {
	return c.componentPod(ControllerMgrPod, []string{
		"--kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=true",
		// Each controller with its own ServiceAccount, as kubeadm and
		// OpenShift run it; the root CA is what the kube-root-ca.crt
		// ConfigMaps hold, without which no pod's token volume mounts.
		"--use-service-account-credentials=true",
		"--root-ca-file=" + caFile,
		"--service-cluster-ip-range=" + serviceCIDR4 + "," + serviceCIDR6,
		// Pod ranges are the lab's (NodeSpec.PodCIDR4/6), as with static
		// host-gw routes: nothing to allocate.
		"--allocate-node-cidrs=false",
		// The controllers the lab's objects need (Deployments, their
		// EndpointSlices, ServiceAccounts and their CA, PDBs for drains,
		// nodes going NotReady), not the whole set: every controller
		// more is informers more on two shared cores.
		"--controllers=deployment-controller,replicaset-controller,endpointslice-controller,serviceaccount-controller," +
			"namespace-controller,node-lifecycle-controller,root-ca-certificate-publisher-controller,disruption-controller," +
			"pod-garbage-collector-controller,service-cidr-controller",
		"--v=1",
	}, httpProbe(corev1.URISchemeHTTPS, controllerMgrPort, "/healthz"))
}

func (c *Cluster) schedulerPod() *corev1.Pod {
	return c.componentPod(SchedulerPod, []string{
		"--kubeconfig=" + schedKubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=true",
		"--v=1",
	}, httpProbe(corev1.URISchemeHTTPS, schedulerPort, "/healthz"))
}

// kubeProxyPod runs kube-proxy in nftables mode on the node, reaching the
// API through the API VIP. It sets no conntrack sysctls: the machine's
// table size is not the lab's to change.
func (c *Cluster) kubeProxyPod(s NodeSpec) *corev1.Pod {
	p := c.componentPod(KubeProxyPod, []string{
		"--proxy-mode=nftables",
		"--kubeconfig=" + kubeProxyKubeconfig,
		"--hostname-override=" + s.Name,
		"--cluster-cidr=" + clusterCIDR4 + "," + clusterCIDR6,
		"--conntrack-max-per-core=0",
		"--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249",
		fmt.Sprintf("--healthz-bind-address=0.0.0.0:%d", kubeProxyHealthz),
		"--v=1",
	}, httpProbe(corev1.URISchemeHTTP, kubeProxyHealthz, "/healthz"))
	p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
	return p
}

// staticPods are the component manifests of a node.
func (c *Cluster) staticPods(s NodeSpec) []*corev1.Pod {
	pods := []*corev1.Pod{c.kubeProxyPod(s)}
	if s.Role == RoleMaster {
		pods = append(pods, c.etcdPod(s), c.apiServerPod(s), c.controllerManagerPod(), c.schedulerPod())
	}
	return pods
}

func manifestFile(t testing.TB, p *corev1.Pod) kubeletlab.File {
	t.Helper()
	data, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return kubeletlab.File{Path: ManifestPath(p.Name), Mode: 0o644, Data: data}
}
