package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ports vipctl's own processes bind on the nodes whatever the config
// says. pkg/onnode/paths.go gives them their node-side names
// (onnode.SidecarPort, HaproxyStatsPort); they are defined here so that
// Validate can refuse a configured port that would clash with one of them
// (haproxy, kube-apiserver or a router would then fail to bind it on every
// node): they are in the table below. 9447-9449 are in the 9000-9999 range OpenShift opens between
// nodes and in none of its host port registry's entries
// (openshift/enhancements dev-guide/host-port-registry.md).
const (
	// SidecarProbePort: the sidecar's /healthz, /readyz and plain
	// /metrics, on 127.0.0.1 only.
	SidecarProbePort = 9447
	// HaproxyStatsPort: haproxy's stats page, on 127.0.0.1 only.
	HaproxyStatsPort = 9448
	// DefaultMetricsPort is spec.monitoring.port's default: the sidecar's
	// /metrics for the cluster's Prometheus, on every address, TLS with
	// the scraper authorized by the API server (pkg/metricsserver). The
	// allocator's pod serves its own on the same number.
	DefaultMetricsPort = 9449
)

// NodePort is one TCP port, or a range of them, that something binds on
// a cluster's nodes whatever vipctl's config says: none of vipctl's
// listeners (haproxy's loadBalancerPort, internalLoadBalancerPort and
// healthPort, the sidecar's spec.monitoring.port) may take one, and an
// IngressController's healthPort may be none but the router's own. A
// listener that binds every address clashes with one that binds
// 127.0.0.1 all the same, and roles overlap (a compact cluster's nodes are
// control plane, workers and routers at once), so the table holds every
// role's ports and each entry's Nodes only explains it.
type NodePort struct {
	// First and Last are the ports (Last == First for one).
	First, Last int32
	// Use says who binds them, as the start of a sentence ("the kubelet
	// serves its API").
	Use string
	// Nodes says on which nodes.
	Nodes string
	// When names the configs it applies to; empty: all of them.
	When string
	// owner tells vipctl's own from the platform's and the router's.
	owner portOwner
}

type portOwner int

const (
	platformPort portOwner = iota
	vipctlPort
	routerPort
)

// Conditions of NodePort.When.
const (
	whenPoolsOnly = "spec.mode poolsOnly (OpenShift's own on-prem load balancer runs)"
	whenBGP       = "spec.bgp set"
)

// Where the platform's ports are bound.
const (
	everyNode    = "every node"
	controlPlane = "control-plane nodes"
	routerNodes  = "nodes running router pods"
	baremetalCP  = "control-plane nodes of bare-metal installer-provisioned clusters"
	localhostAll = "every node, on 127.0.0.1"
	localhostCP  = "control-plane nodes, on 127.0.0.1"
)

// nodePorts is the one table. The platform's entries follow OpenShift's
// host port registry (openshift/enhancements,
// dev-guide/host-port-registry.md, which says since which 4.x release
// each port is bound; all are by 4.14, the oldest release vipctl
// supports), plus the NodePort range and, beside OpenShift's own load
// balancer, the machine-config-operator's on-prem haproxy and CoreDNS.
var nodePorts = []NodePort{
	{First: 22, Use: "sshd serves SSH", Nodes: everyNode},
	{First: 53, Use: "OpenShift's on-prem CoreDNS serves the nodes' DNS", Nodes: everyNode, When: whenPoolsOnly},
	{First: 80, Use: "the router serves HTTP routes", Nodes: routerNodes, owner: routerPort},
	{First: BGPPort, Use: "vipctl's FRR (bgpd) speaks BGP", Nodes: "nodes with bgp pools", When: whenBGP, owner: vipctlPort},
	{First: 443, Use: "the router serves HTTPS routes", Nodes: routerNodes, owner: routerPort},
	{First: DefaultRouterHealthPort, Use: "the router serves /healthz and stats", Nodes: routerNodes, owner: routerPort},
	{First: 2379, Last: 2380, Use: "etcd serves its clients and peers", Nodes: controlPlane},
	{First: 3306, Use: "the bare-metal provisioning database (ironic's MariaDB) listens", Nodes: baremetalCP},
	{First: 4180, Use: "the machine-config-daemon's oauth-proxy listens", Nodes: localhostAll},
	{First: 5050, Use: "ironic-inspector listens", Nodes: baremetalCP},
	{First: 6080, Use: "the kube-apiserver-operator serves its readyz", Nodes: controlPlane},
	{First: 6180, Last: 6181, Use: "the bare-metal provisioning httpd serves images", Nodes: baremetalCP},
	{First: 6183, Use: "the bare-metal provisioning httpd serves images over TLS", Nodes: baremetalCP},
	{First: 6385, Use: "ironic-api listens", Nodes: baremetalCP},
	{First: DefaultAPIPort, Use: "kube-apiserver serves the API", Nodes: controlPlane},
	{First: 8089, Use: "ironic-conductor listens", Nodes: baremetalCP},
	{First: 8200, Last: 8219, Use: "CSI drivers serve metrics", Nodes: everyNode},
	{First: 8797, Use: "the machine-config-daemon serves metrics", Nodes: localhostAll},
	{First: 9001, Use: "the machine-config-daemon's proxy serves metrics", Nodes: everyNode},
	{First: 9100, Use: "node-exporter serves metrics", Nodes: everyNode},
	{First: 9101, Last: 9103, Use: "the network plugin (OVN-Kubernetes, openshift-sdn, kube-proxy) serves metrics", Nodes: everyNode},
	{First: 9200, Last: 9219, Use: "CSI drivers serve metrics", Nodes: everyNode},
	{First: 9258, Use: "the cluster-cloud-controller-manager-operator serves metrics", Nodes: controlPlane},
	{First: 9259, Use: "the cluster-cloud-controller-manager-operator serves healthz", Nodes: localhostCP},
	{First: 9443, Use: "kube-controller-manager's recovery controller listens", Nodes: localhostCP},
	{First: DefaultHealthPort, Use: "OpenShift's on-prem haproxy serves its readiness", Nodes: controlPlane, When: whenPoolsOnly},
	{First: DefaultLoadBalancerPort, Use: "OpenShift's on-prem haproxy balances the API", Nodes: controlPlane, When: whenPoolsOnly},
	{First: 9446, Use: "the baremetal-operator serves healthz", Nodes: baremetalCP},
	{First: SidecarProbePort, Use: "vipctl's sidecar serves its health probes on 127.0.0.1", Nodes: everyNode, owner: vipctlPort},
	{First: HaproxyStatsPort, Use: "haproxy serves its stats page on 127.0.0.1", Nodes: controlPlane, owner: vipctlPort},
	{First: 9537, Use: "CRI-O serves metrics", Nodes: everyNode},
	{First: 9641, Last: 9644, Use: "OVN-Kubernetes' databases listen", Nodes: controlPlane},
	{First: 9977, Last: 9979, Use: "etcd serves metrics", Nodes: controlPlane},
	{First: 10010, Use: "CRI-O serves exec and attach streams", Nodes: everyNode},
	{First: 10248, Use: "the kubelet serves healthz", Nodes: localhostAll},
	{First: 10250, Use: "the kubelet serves its API", Nodes: everyNode},
	{First: 10251, Use: "kube-scheduler serves healthz", Nodes: controlPlane},
	{First: 10255, Last: 10256, Use: "the network plugin (kube-proxy, OVN-Kubernetes, openshift-sdn) serves healthz", Nodes: everyNode},
	{First: 10257, Use: "kube-controller-manager serves metrics and healthz", Nodes: controlPlane},
	{First: 10258, Use: "the cloud-controller-manager serves metrics and healthz", Nodes: controlPlane},
	{First: 10259, Use: "kube-scheduler serves metrics", Nodes: controlPlane},
	{First: 10263, Use: "the cloud-node-manager serves metrics and healthz", Nodes: everyNode},
	{First: 10300, Last: 10303, Use: "CSI drivers serve healthz", Nodes: localhostAll},
	{First: 10357, Use: "the cluster-policy-controller serves healthz", Nodes: controlPlane},
	{First: 10443, Last: 10444, Use: "the router's internal frontends listen", Nodes: routerNodes + ", on 127.0.0.1", owner: routerPort},
	{First: 11443, Use: "kube-scheduler's recovery controller listens", Nodes: localhostCP},
	{First: 17697, Use: "kube-apiserver checks its endpoints", Nodes: controlPlane},
	{First: MachineConfigServerPort, Use: "the machine config server serves Ignition", Nodes: controlPlane},
	{First: MachineConfigServerInsecurePort, Use: "the machine config server serves Ignition over plain HTTP", Nodes: controlPlane},
	{First: 29101, Last: 29103, Use: "the network plugin serves metrics", Nodes: localhostAll},
	{First: 29445, Use: "OpenShift's on-prem haproxy serves its stats page", Nodes: localhostCP, When: whenPoolsOnly},
	{First: 30000, Last: 32767, Use: "kube-proxy or OVN-Kubernetes serves Services of type NodePort (the default --service-node-port-range)", Nodes: everyNode},
	{First: 60000, Use: "the baremetal-operator serves metrics", Nodes: baremetalCP},
}

// BGPPort is where FRR's bgpd listens on every node with bgp pools.
const BGPPort = 179

// NodePorts is the table, in port order, for the config reference.
func NodePorts() []NodePort { return nodePorts }

// Ports names the entry's ports: "2379-2380", "6443".
func (n NodePort) Ports() string {
	if n.Last > n.First {
		return fmt.Sprintf("%d-%d", n.First, n.Last)
	}
	return fmt.Sprint(n.First)
}

// VipctlOwn tells vipctl's own fixed ports from the platform's.
func (n NodePort) VipctlOwn() bool { return n.owner == vipctlPort }

func (n NodePort) holds(p int32) bool { return p == n.First || (p > n.First && p <= n.Last) }

func (n NodePort) applies(s *ClusterVIPsSpec) bool {
	switch n.When {
	case whenPoolsOnly:
		return s.Mode == ModePoolsOnly
	case whenBGP:
		return s.BGP != nil
	}
	return true
}

// portUse is how a configured port meets the nodes: one vipctl binds, one
// another daemon binds and vipctl forwards to (spec.api.port and
// internalPort), or one vipctl only probes (a router's healthPort).
type portUse int

const (
	listens portUse = iota
	forwardsTo
	probes
)

// boundBy is the entry of the table that rules out p for this use, if
// any: a listener may take no port of the table, a port vipctl forwards
// to none of vipctl's own, a probed port none but the router's.
func boundBy(s *ClusterVIPsSpec, p int32, use portUse) (NodePort, bool) {
	for _, n := range nodePorts {
		if !n.holds(p) || !n.applies(s) {
			continue
		}
		switch {
		case use == forwardsTo && n.owner != vipctlPort:
		case use == probes && n.owner == routerPort:
		default:
			return n, true
		}
	}
	return NodePort{}, false
}

func (n NodePort) refusal(p int32) string {
	ports := fmt.Sprint(p)
	if n.Last > n.First {
		ports = n.Ports()
	}
	return fmt.Sprintf("%s on %s on %s", n.Use, ports, n.Nodes)
}

// seenPort is a configured port some process binds on the nodes.
type seenPort struct {
	port int32
	path *field.Path
	use  portUse
}

// nodePort refuses a configured port that the table rules out for its
// use (and the metrics port while it is the default; a metrics port set
// in spec.monitoring.port is checked against the configured ports by
// monitoringPort, on its own field) and remembers it.
func (v *validator) nodePort(p int32, path *field.Path, use portUse) field.ErrorList {
	v.ports = append(v.ports, seenPort{p, path, use})
	if n, taken := boundBy(v.spec, p, use); taken {
		return field.ErrorList{field.Invalid(path, p, n.refusal(p))}
	}
	if use == probes {
		// Several IngressControllers may share a probed port (1936 is
		// every one's default); a port vipctl's haproxy binds may not be
		// one of them.
		for _, s := range v.ports {
			if s.port == p && s.use != probes {
				return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s is %d too: keepalived would track haproxy, not the router", s.path, p))}
			}
		}
	}
	if !v.metricsPortSet && p == DefaultMetricsPort {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("vipctl's sidecar serves /metrics to the cluster's Prometheus on %d on every node (spec.monitoring.port moves it)", p))}
	}
	return nil
}

// monitoringPort checks spec.monitoring.port, when set, against the table
// and every configured port the nodes bind.
func (v *validator) monitoringPort(p int32, path *field.Path) field.ErrorList {
	if p == 0 {
		return nil
	}
	if errs := validatePort(p, path); len(errs) > 0 {
		return errs
	}
	for _, s := range v.ports {
		if s.port == p {
			return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s is %d too; the sidecar serves /metrics on every address of every node", s.path, p))}
		}
	}
	if n, taken := boundBy(v.spec, p, listens); taken {
		return field.ErrorList{field.Invalid(path, p, n.refusal(p))}
	}
	return nil
}

// MetricsPort is spec.monitoring.port, DefaultMetricsPort when unset. Like
// the stack, it is not written in by SetDefaults (see MonitoringStack).
func (s *ClusterVIPsSpec) MetricsPort() int32 {
	if s.Monitoring == nil || s.Monitoring.Port == 0 {
		return DefaultMetricsPort
	}
	return s.Monitoring.Port
}
