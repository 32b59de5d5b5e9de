// Package v1alpha1 is the versioned input of vipctl: one ClusterVIPs document
// describes every virtual IP of a cluster. It is public so that installers
// can generate it; decoding is strict and defaults are applied in Go.
//
// The +kubebuilder and +listType markers on the spec's types make the
// schema and CEL rules of the ClusterVIPs custom resource
// (pkg/apis/v1alpha1/crd, docs/api.md). They are comments: the decoder
// never reads them, and a rule added here must be one Validate enforces
// too (test/e2e TestCRD/rules holds each to that).
package v1alpha1

const (
	// APIVersion is the only apiVersion this package decodes.
	APIVersion = "vipctl.io/v1alpha1"
	// Kind is the only kind this package decodes.
	Kind = "ClusterVIPs"
)

// ClusterVIPs is the whole input: the cluster's API VIPs, one entry per
// IngressController, pools for Services of type LoadBalancer and how VRRP
// runs between the nodes.
type ClusterVIPs struct {
	// APIVersion must be vipctl.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be ClusterVIPs.
	Kind string `json:"kind"`
	// Metadata names the cluster.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the desired state of every VIP.
	Spec ClusterVIPsSpec `json:"spec"`
}

// ObjectMeta names the cluster. Name is the OpenShift cluster name: it feeds
// the VRRP ID computation, so it must match the installer's name to stay
// compatible with IDs in use today.
type ObjectMeta struct {
	// Name is the cluster name (a DNS-1123 label), as given to the installer.
	Name string `json:"name"`
	// Labels are free-form, for the user's own tooling, and stay in this
	// file: neither the vipctl-config ConfigMap nor the cluster.yaml the
	// MachineConfigs lay on the nodes carries them, so editing them
	// changes nothing in the cluster.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are free-form and stay in this file, as Labels do.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ClusterVIPsSpec is the desired state of every VIP of one cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.mode) && self.mode == 'poolsOnly' || (has(self.api) && has(self.api.vips) && size(self.api.vips) > 0)",message="the API VIP, one per IP family, is required in mode full",fieldPath=".api.vips",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!(has(self.mode) && self.mode == 'poolsOnly') || !has(self.api) || !(has(self.api.vips) || has(self.api.port) || has(self.api.internalPort) || has(self.api.internalLoadBalancerPort) || has(self.api.loadBalancerPort) || has(self.api.healthPort) || has(self.api.internalVIPs) || has(self.api.internalAllowedSources) || has(self.api.routed))",message="mode poolsOnly: OpenShift's own keepalived and haproxy carry the API VIP; leave spec.api out",fieldPath=".api",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!(has(self.mode) && self.mode == 'poolsOnly') || !has(self.ingress) || size(self.ingress) == 0",message="mode poolsOnly: OpenShift's own keepalived carries the ingress VIP; leave spec.ingress out",fieldPath=".ingress",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!(has(self.mode) && self.mode == 'poolsOnly') || !has(self.bootstrap)",message="mode poolsOnly: vipctl holds no API VIP for a bootstrap host to bridge",fieldPath=".bootstrap",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.bgp) || !has(self.servicePools) || !self.servicePools.exists(p, has(p.mode) && p.mode == 'bgp')",message="a pool has mode bgp: name the nodes' ASN and their peers",fieldPath=".bgp",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="has(self.bgp) || ((!has(self.api) || !has(self.api.routed) || !self.api.routed) && (!has(self.ingress) || !self.ingress.exists(ic, has(ic.routed) && ic.routed)))",message="a routed VIP (spec.api.routed, an IngressController's routed): name the nodes' ASN and the peers the VIPs are announced to",fieldPath=".bgp",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="(!has(self.api) || !has(self.api.routed) || !self.api.routed) && (!has(self.ingress) || !self.ingress.exists(ic, has(ic.routed) && ic.routed)) || !has(self.vrrp) || !has(self.vrrp.mode) || self.vrrp.mode == 'unicast'",message="a routed VIP needs spec.vrrp.mode unicast: its holder is elected across routers, where multicast adverts do not go",fieldPath=".vrrp.mode"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.labels) || (has(self.api) && has(self.api.routed) && self.api.routed)",message="only with spec.api.routed: the labels choose the BGP peers the bootstrap host announces the API VIP to",fieldPath=".bootstrap.labels",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.servicePools) || self.servicePools.all(p, !has(p.bgp) || !has(p.bgp.peers) || p.bgp.peers.all(a, !isIP(a) || (has(self.bgp) && self.bgp.peers.exists(q, has(q.address) && isIP(q.address) && ip(q.address) == ip(a)))))",message="a pool's bgp.peers names an address that is no peer of spec.bgp.peers",fieldPath=".servicePools"
// +kubebuilder:validation:XValidation:rule="!has(self.api) || !has(self.api.vips) || (has(self.api.routed) && self.api.routed) || self.api.vips.all(v, !isIP(v) || self.machineNetworks.exists(n, isCIDR(n) && cidr(n).containsIP(v)))",message="every API VIP must lie inside a machine network, unless spec.api.routed",fieldPath=".api.vips"
// +kubebuilder:validation:XValidation:rule="!has(self.api) || !has(self.api.internalVIPs) || (has(self.api.routed) && self.api.routed) || self.api.internalVIPs.all(v, !isIP(v) || self.machineNetworks.exists(n, isCIDR(n) && cidr(n).containsIP(v)))",message="every api-int VIP must lie inside a machine network, unless spec.api.routed",fieldPath=".api.internalVIPs"
// +kubebuilder:validation:XValidation:rule="!has(self.ingress) || self.ingress.all(ic, has(ic.interface) || has(ic.interfaceLabel) || (has(ic.routed) && ic.routed) || ic.vips.all(v, !isIP(v) || self.machineNetworks.exists(n, isCIDR(n) && cidr(n).containsIP(v))))",message="every ingress VIP must lie inside a machine network, unless its IngressController names an interface or is routed",fieldPath=".ingress"
// +kubebuilder:validation:XValidation:rule="!has(self.api) || !has(self.api.vips) || self.api.vips.all(v, !isIP(v) || !self.machineNetworks.exists(n, isCIDR(n) && cidr(n).prefixLength() < (cidr(n).ip().family() == 4 ? 31 : 127) && cidr(n).ip() == ip(v)))",message="an API VIP is the network address of a machine network",fieldPath=".api.vips"
// +kubebuilder:validation:XValidation:rule="!has(self.ingress) || self.ingress.all(ic, ic.vips.all(v, !isIP(v) || !self.machineNetworks.exists(n, isCIDR(n) && cidr(n).prefixLength() < (cidr(n).ip().family() == 4 ? 31 : 127) && cidr(n).ip() == ip(v))))",message="an ingress VIP is the network address of a machine network",fieldPath=".ingress"
// +kubebuilder:validation:XValidation:rule="!has(self.ingress) || self.ingress.all(a, !has(a.domain) || self.ingress.filter(b, has(b.domain) && b.domain == a.domain).size() == 1)",message="two IngressControllers serve one domain: one domain, one IngressController, one wildcard record",fieldPath=".ingress"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || self.bootstrap.addresses.all(a, !isIP(a) || (has(self.api) && has(self.api.vips) && self.api.vips.exists(v, isIP(v) && ip(v).family() == ip(a).family())))",message="a bootstrap address of an IP family spec.api.vips has no VIP of",fieldPath=".bootstrap.addresses"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.api) || !has(self.api.vips) || self.api.vips.all(v, !isIP(v) || self.bootstrap.addresses.exists(a, isIP(a) && ip(a).family() == ip(v).family()))",message="the bootstrap host needs an address in each IP family of spec.api.vips",fieldPath=".bootstrap.addresses",reason=FieldValueRequired
type ClusterVIPsSpec struct {
	// BaseDomain is the cluster's base DNS domain (api.<name>.<baseDomain>).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
	BaseDomain string `json:"baseDomain"`
	// MachineNetworks are the node subnets; every VIP must sit inside one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be a CIDR with no host bits set, such as 198.51.100.0/24"
	MachineNetworks []string `json:"machineNetworks"`
	// Mode is what vipctl carries: "full" (the default, also when empty:
	// the API VIP, the IngressControllers' VIPs and the Service pools, on
	// a cluster installed with a user-managed load balancer or platform
	// none) or "poolsOnly" (only the Service pools, beside the keepalived
	// that OpenShift itself runs for the API and ingress VIPs on a
	// cluster installed with the default load balancer). In poolsOnly
	// mode spec.api and spec.ingress must be left out; the pools' VRRP IDs
	// avoid OpenShift's own API and ingress IDs (vipctl vr-ids shows
	// them), no haproxy runs and nothing of OpenShift's keepalived is
	// touched (docs/install.md, "An existing cluster with OpenShift's own
	// keepalived").
	// +kubebuilder:validation:Enum=full;poolsOnly
	Mode string `json:"mode,omitempty"`
	// API is the Kubernetes API VIP, held by control-plane nodes. Required
	// in mode full, left out in mode poolsOnly.
	// +optional
	API APISpec `json:"api"`
	// Ingress has one entry per IngressController, sharded ones included.
	// None in mode poolsOnly.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Ingress []IngressSpec `json:"ingress,omitempty"`
	// ServicePools are address pools for Services of type LoadBalancer.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	ServicePools []ServicePool `json:"servicePools,omitempty"`
	// VRRP tunes how keepalived talks between the nodes.
	// +kubebuilder:default={}
	VRRP VRRPSpec `json:"vrrp,omitempty"`
	// BGP is how the nodes announce the addresses of `mode: bgp` pools to
	// the routers upstream. Required when a pool has mode bgp.
	BGP *BGPSpec `json:"bgp,omitempty"`
	// Images are the container images of the static pods.
	Images Images `json:"images,omitempty"`
	// Bootstrap names the host that holds the API VIP while an OpenShift
	// cluster installs, before any control-plane node can: it runs
	// `vipctl bootstrap` (docs/bootstrap.md), and the control-plane nodes
	// accept its VRRP adverts for the API VIP while this is set. Remove it
	// once the install has completed (`vipctl update`: no reboot).
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
	// OpenShiftRelease is the oldest OpenShift release (major.minor, such
	// as "4.16") the MachineConfigs must be accepted by. It picks their
	// Ignition spec version: the newest that release's Machine Config
	// Operator parses, which every later release parses too. The supported
	// releases and the spec each gets are listed in docs/render.md. Default
	// 4.14, the oldest supported, so that the output works on every one.
	// `vipctl render --openshift-release` overrides it.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+$`
	OpenShiftRelease string `json:"openshiftRelease,omitempty"`
	// Monitoring says which Prometheus scrapes vipctl and evaluates its
	// alerts (docs/monitoring.md). Default: OpenShift's cluster
	// monitoring.
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`
	// LoadBalancerClass says which Services of type LoadBalancer vipctl
	// serves, by their spec.loadBalancerClass. Default: those of class
	// vipctl.io/keepalived and those without a class.
	LoadBalancerClass *LoadBalancerClassSpec `json:"loadBalancerClass,omitempty"`
}

// APISpec describes the API VIP and the haproxy in front of kube-apiserver.
//
// +kubebuilder:validation:XValidation:rule="!has(self.internalLoadBalancerPort) || has(self.internalPort)",message="set only together with internalPort",fieldPath=".internalLoadBalancerPort"
// +kubebuilder:validation:XValidation:rule="!has(self.internalAllowedSources) || size(self.internalAllowedSources) == 0 || has(self.internalPort) || (has(self.internalVIPs) && size(self.internalVIPs) > 0)",message="set only together with internalPort or internalVIPs: without either there is nothing it would let in",fieldPath=".internalAllowedSources"
// +kubebuilder:validation:XValidation:rule="!has(self.internalVIPs) || self.internalVIPs.all(i, !isIP(i) || (has(self.vips) && self.vips.exists(v, isIP(v) && ip(v).family() == ip(i).family())))",message="an api-int VIP of an IP family vips has none of: api-int serves the same API, in its families",fieldPath=".internalVIPs"
// +kubebuilder:validation:XValidation:rule="([has(self.port) ? self.port : 6443, has(self.loadBalancerPort) ? self.loadBalancerPort : 9445, has(self.healthPort) ? self.healthPort : 9444, has(self.internalPort) ? self.internalPort : 0, has(self.internalLoadBalancerPort) ? self.internalLoadBalancerPort : (has(self.internalPort) ? 22625 : 0)].filter(x, x != 0).all(x, [has(self.port) ? self.port : 6443, has(self.loadBalancerPort) ? self.loadBalancerPort : 9445, has(self.healthPort) ? self.healthPort : 9444, has(self.internalPort) ? self.internalPort : 0, has(self.internalLoadBalancerPort) ? self.internalLoadBalancerPort : (has(self.internalPort) ? 22625 : 0)].filter(x, x != 0).filter(y, y == x).size() == 1))",message="port, internalPort, internalLoadBalancerPort, loadBalancerPort and healthPort must all differ (their defaults 6443, 22625, 9445 and 9444 count)"
type APISpec struct {
	// VIPs holds at most one address per IP family.
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || !isIP(self[0]) || !isIP(self[1]) || ip(self[0]).family() != ip(self[1]).family()",message="one address per IP family"
	VIPs []string `json:"vips,omitempty"`
	// Port is where clients reach kube-apiserver on the VIP. Default 6443.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// InternalPort, when set (OpenShift uses 22623 for api-int's machine
	// config server), is balanced over the control plane as well.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	InternalPort int32 `json:"internalPort,omitempty"`
	// InternalLoadBalancerPort is haproxy's port for InternalPort, which the
	// machine config server holds on every control-plane node (and 22624,
	// its plain-HTTP port, too). Default 22625 when internalPort is set.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	InternalLoadBalancerPort int32 `json:"internalLoadBalancerPort,omitempty"`
	// LoadBalancerPort is where haproxy listens on every control-plane node.
	// kube-apiserver already binds Port on all addresses, so haproxy cannot
	// share it. Default 9445, as OpenShift uses.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	LoadBalancerPort int32 `json:"loadBalancerPort,omitempty"`
	// HealthPort serves haproxy's own readiness for keepalived's track
	// script. Default 9444.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HealthPort int32 `json:"healthPort,omitempty"`
	// InternalVIPs, when set, give api-int (api-int.<cluster>.<baseDomain>,
	// which the nodes' kubelets and their Ignition fetch use) VIPs of its
	// own, at most one per family of vips: a VRRP instance of its own
	// (key api-int), held by control-plane nodes like the API VIP and
	// serving port and internalPort the same way, but answering only
	// internalAllowedSources on every port. Without it api-int resolves
	// to vips (docs/dns.md).
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || !isIP(self[0]) || !isIP(self[1]) || ip(self[0]).family() != ip(self[1]).family()",message="one address per IP family"
	InternalVIPs []string `json:"internalVIPs,omitempty"`
	// InternalAllowedSources are the clients (CIDRs) that may reach
	// internalPort, on a control-plane node's every address (the machine
	// config server hands out the cluster's secrets there, plain HTTP on
	// its port 22624 too), and any port of internalVIPs; every other
	// client's connection is refused by nftables on the node
	// (docs/security.md). The cluster's node addresses and
	// spec.bootstrap's are always allowed. Default: spec.machineNetworks.
	// Refused unless internalPort or internalVIPs is set.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be a CIDR with no host bits set, such as 198.51.100.0/24"
	// +kubebuilder:validation:items:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= (cidr(self).ip().family() == 4 ? 8 : 32)",message="wider than a /8 (IPv4) or a /32 (IPv6): would let most of the internet fetch the cluster's secrets from the machine config server"
	InternalAllowedSources []string `json:"internalAllowedSources,omitempty"`
	// Routed announces the API VIPs (and internalVIPs) as host routes,
	// /32 and /128, over BGP to spec.bgp.peers from the node that holds
	// them: control-plane nodes in racks of their own, on no common
	// segment, then serve one API VIP. VRRP still elects the holder,
	// unicast between the control-plane nodes' own addresses across the
	// routed network (spec.vrrp.mode unicast), with haproxy's health in
	// its priority as always; the holder's FRR announces each VIP while
	// the VIP is on its interface (a connected route), so the routers
	// have one path and no ECMP rehash moves established connections.
	// The VIPs may then lie outside every machine network. Needs
	// spec.bgp, with peers that select the control-plane nodes.
	// docs/bgp.md, "The API VIP across racks".
	Routed bool `json:"routed,omitempty"`
}

// BootstrapSpec is the host that serves the API VIP during an install
// (`vipctl bootstrap`): the bootstrap machine itself or any host on the
// API VIP's segment (with spec.api.routed, in any machine network).
type BootstrapSpec struct {
	// Addresses are that host's own addresses, one for each IP family of
	// spec.api.vips, each in the machine network of the API VIP of its
	// family (with spec.api.routed, in any machine network): it sends its
	// VRRP adverts from them, and the control-plane nodes list them as
	// unicast peers of the API instance (adverts from any other address
	// are ignored).
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || !isIP(self[0]) || !isIP(self[1]) || ip(self[0]).family() != ip(self[1]).family()",message="one address per IP family"
	Addresses []string `json:"addresses"`
	// Labels are those the bootstrap host would carry as a Node, for a
	// routed API VIP (spec.api.routed) only: the host runs FRR during the
	// install and peers with every router of spec.bgp.peers whose
	// nodeSelector they match (its rack's, say). Default: a control-plane
	// node's role labels (node-role.kubernetes.io/master and
	// node-role.kubernetes.io/control-plane), which match the peers that
	// select no node or every control-plane node. docs/bgp.md, "The API
	// VIP across racks".
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	Labels map[string]string `json:"labels,omitempty"`
}

// IngressSpec is the VIP of one IngressController. It may only sit on nodes
// that run a ready router pod of this very controller.
//
// +kubebuilder:validation:XValidation:rule="self.name == 'default' || has(self.domain)",message="the domain this IngressController serves (only \"default\" has one by default)",fieldPath=".domain",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.interfaceLabel)",message="set interface or interfaceLabel, not both",fieldPath=".interfaceLabel"
type IngressSpec struct {
	// Name is the IngressController's name; "default" is OpenShift's own.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Domain served by this controller. Defaults to apps.<cluster>.<baseDomain>
	// for "default"; required for other controllers.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
	Domain string `json:"domain,omitempty"`
	// VIPs holds at most one address per IP family.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || !isIP(self[0]) || !isIP(self[1]) || ip(self[0]).family() != ip(self[1]).family()",message="one address per IP family"
	VIPs []string `json:"vips"`
	// RouterNamespace holds the router pods. Default openshift-ingress.
	// +kubebuilder:default=openshift-ingress
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	RouterNamespace string `json:"routerNamespace,omitempty"`
	// RouterSelector picks this controller's router pods. Default:
	// ingresscontroller.operator.openshift.io/deployment-ingresscontroller=<name>.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	RouterSelector map[string]string `json:"routerSelector,omitempty"`
	// NodeSelector names the nodes this controller's routers may run on:
	// the labels of the IngressController's
	// spec.nodePlacement.nodeSelector.matchLabels, copied. Only those nodes
	// take part in its VRRP instance, in `vipctl render` as in the
	// sidecar before it sees the routers: in a large cluster the peer
	// lists stay as short as the router's node pool. Empty means every
	// node (a router may be scheduled anywhere).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// HealthPort is the router's readiness port (/healthz/ready). Default 1936.
	// +kubebuilder:default=1936
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HealthPort int32 `json:"healthPort,omitempty"`
	// Interface puts the VIPs on this node interface (a DMZ VLAN, say)
	// instead of spec.vrrp.interface, as for a service pool's `interface`;
	// the routers are unaffected (they listen on every address).
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,15}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="must be a network interface name"
	Interface string `json:"interface,omitempty"`
	// InterfaceLabel names a node label whose value is that interface on
	// each node, as for a service pool's `interfaceLabel`.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	InterfaceLabel string `json:"interfaceLabel,omitempty"`
	// Routed announces this controller's VIPs over BGP from the node
	// that holds them, as spec.api.routed does for the API's: router
	// nodes in racks of their own serve one ingress VIP. Its VIPs may
	// then lie outside every machine network. Needs spec.bgp, with peers
	// that select the router nodes, and spec.vrrp.mode unicast.
	Routed bool `json:"routed,omitempty"`
}

// ServicePool is a set of addresses handed out to Services of type
// LoadBalancer and announced by keepalived on the pool's nodes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.announce) || !has(self.mode) || self.mode != 'bgp'",message="only for mode vrrp: a bgp pool's routes are announced by FRR",fieldPath=".announce"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.interfaceLabel)",message="set interface or interfaceLabel, not both",fieldPath=".interfaceLabel"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.mode) || self.mode != 'bgp'",message="only for mode vrrp: a bgp pool's addresses are routes, on no interface",fieldPath=".interface"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.announce) || self.announce != 'sidecar'",message="only with announce: keepalived: the sidecar announces Service addresses on spec.vrrp.interface alone",fieldPath=".interface"
// +kubebuilder:validation:XValidation:rule="!has(self.interfaceLabel) || !has(self.mode) || self.mode != 'bgp'",message="only for mode vrrp: a bgp pool's addresses are routes, on no interface",fieldPath=".interfaceLabel"
// +kubebuilder:validation:XValidation:rule="!has(self.interfaceLabel) || !has(self.announce) || self.announce != 'sidecar'",message="only with announce: keepalived: the sidecar announces Service addresses on spec.vrrp.interface alone",fieldPath=".interfaceLabel"
// +kubebuilder:validation:XValidation:rule="!has(self.externalIPs) || !self.externalIPs || (has(self.namespaces) && size(self.namespaces) > 0)",message="externalIPs: true lets Services of these namespaces claim the pool's addresses in spec.externalIPs; without namespaces every tenant could (CVE-2020-8554)",fieldPath=".namespaces",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.bgp) || (has(self.mode) && self.mode == 'bgp')",message="only for mode bgp: a vrrp pool's addresses are held by keepalived, not routed",fieldPath=".bgp"
type ServicePool struct {
	// Name is unique within the cluster; Services pick a pool by it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Mode is "vrrp" (default: keepalived moves each address between the
	// nodes of one L2 segment) or "bgp" (every node that should attract a
	// Service's traffic announces its address as a /32 or /128 route to
	// the peers of spec.bgp; the nodes may sit on different subnets).
	// A bgp pool takes no VRRP instance and no VRRP ID, and its addresses
	// need not lie in a machine network.
	// +kubebuilder:default=vrrp
	// +kubebuilder:validation:Enum=vrrp;bgp
	Mode string `json:"mode,omitempty"`
	// Announce says who puts a vrrp pool's Service addresses on the
	// holder's interface: "keepalived" (the default, also when empty:
	// every address is in the
	// instance's keepalived.conf, which every Service changes) or
	// "sidecar" (keepalived.conf carries only the instance's anchor; the
	// vipctl sidecar adds the Service addresses in one netlink burst as
	// soon as the anchor is on the interface, announces them with
	// gratuitous ARP or unsolicited neighbour advertisements, and removes
	// them when the anchor leaves). "sidecar" is for pools of thousands of
	// addresses: keepalived adds an instance's addresses one at a time,
	// sending no advert meanwhile. With "sidecar", IPv6 addresses are
	// answered by a local route and a proxy neighbour entry each instead
	// of an address (far cheaper for the kernel), where the node has the
	// settings the MachineConfig ships for it; but while the would-be
	// holder's sidecar is down its Service addresses wait for it (docs/render.md,
	// "Which announce a vrrp pool should use", has the numbers). Unused by bgp pools.
	// +kubebuilder:validation:Enum=keepalived;sidecar
	Announce string `json:"announce,omitempty"`
	// Addresses are CIDRs ("198.51.100.128/26") or inclusive ranges
	// ("198.51.100.200-198.51.100.210"), IPv4 or IPv6. The last `instances`
	// addresses of the last range of each family are the VRRP instances'
	// anchors (the only addresses in their adverts) and are never given to
	// a Service (a bgp pool has no instances and no anchors).
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=91
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) ? cidr(self) == cidr(self).masked() : self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim()) && ip(self.split('-')[0].trim()).family() == ip(self.split('-')[1].trim()).family()",message="must be a CIDR with no host bits set (198.51.100.128/26) or a range of one IP family (198.51.100.200-198.51.100.210)"
	Addresses []string `json:"addresses"`
	// NodeSelector picks the nodes that may hold this pool's VIPs. Empty
	// means every node that runs keepalived.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Namespaces that may draw from this pool. Empty means all.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`
	// ServiceSelector restricts the pool to Services with these labels.
	// The labels are set by whoever owns the Service, so this selects; it
	// does not protect: use namespaces to keep a tenant out.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	ServiceSelector map[string]string `json:"serviceSelector,omitempty"`
	// MaxPerNamespace caps how many Services of one namespace may hold an
	// address of this pool, so that one tenant cannot drain it for all.
	// Default 0: no cap.
	// +kubebuilder:validation:Minimum=0
	MaxPerNamespace int `json:"maxPerNamespace,omitempty"`
	// ShareAcrossNamespaces lets Services of different namespaces share
	// one address through the vipctl.io/allow-shared-ip annotation. Off
	// by default: the sharing key is then scoped to one namespace, so a
	// Service elsewhere that guesses a key cannot join another tenant's
	// address.
	ShareAcrossNamespaces bool `json:"shareAcrossNamespaces,omitempty"`
	// AutoAssign lets Services without an explicit pool draw from it.
	// Default true.
	// +kubebuilder:default=true
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// ExternalIPs lets Services of the pool's namespaces name its
	// addresses in spec.externalIPs, of any type: each such address is
	// announced like a load-balancer address (held by one node of a vrrp
	// pool, routed by a bgp pool) and kube-proxy takes it from there. Off
	// by default: spec.externalIPs is free text any Service owner may
	// write (CVE-2020-8554), so only the pool's `namespaces` (set them)
	// decide who may use which address; docs/security.md. The allocator
	// never hands such an address to another Service and reports an
	// address one Service names while another holds it.
	ExternalIPs bool `json:"externalIPs,omitempty"`
	// Interface puts the pool's VIPs on this node interface, named the
	// same on every node (a DMZ VLAN such as "bond0.100" or "br-dmz"),
	// instead of spec.vrrp.interface. VRRP itself stays where it was: the
	// adverts travel on spec.vrrp.interface between the nodes' addresses
	// in the machine network of the VIP's family, so the VLAN needs no
	// VRRP of its own, and keepalived tracks the interface, so a node
	// whose link there is down gives the VIPs to a peer. The addresses
	// need not lie in a machine network, but the nodes need an address
	// or a route on that network to answer its clients (NMState gives
	// them one; docs/render.md, "VIPs on their own interface or VLAN").
	// A node known to lack the interface holds none of the pool's VIPs:
	// `validate --nodes` refuses it, the sidecar reports it
	// (PoolInterfaceMissing). Only for vrrp pools with announce:
	// keepalived.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,15}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="must be a network interface name"
	Interface string `json:"interface,omitempty"`
	// InterfaceLabel names a node label whose value is that interface on
	// each node, for nodes whose names for it differ; a node without the
	// label holds none of the pool's VIPs. Not together with interface.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	InterfaceLabel string `json:"interfaceLabel,omitempty"`
	// Instances is the number of VRRP instances per IP family the pool's
	// VIPs are spread over; each gets other node priorities so the VIPs are
	// held by different nodes at once. Default 2. Unused by bgp pools.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Instances int `json:"instances,omitempty"`
	// MaxHolders caps how many of the selected nodes take part in each of
	// the pool's VRRP instances (the ones with the highest hashed priority
	// for that instance). Seven backups are plenty; every extra member
	// costs a unicast peer on every node. Default 8. Unused by bgp pools,
	// where every node the nodeSelector picks announces.
	// +kubebuilder:default=8
	// +kubebuilder:validation:Minimum=2
	MaxHolders int `json:"maxHolders,omitempty"`
	// BGP is a bgp pool's routing policy: which of spec.bgp.peers get its
	// routes and what the routes carry (docs/bgp.md, "Per-pool policy").
	// Only for mode bgp.
	BGP *PoolBGP `json:"bgp,omitempty"`
}

// VRRPSpec tunes VRRP between the nodes.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.profile) && self.profile == 'fast' && has(self.version) && self.version == 2)",message="the fast profile needs VRRPv3 (VRRPv2 cannot advertise more often than once a second)",fieldPath=".version"
// +kubebuilder:validation:XValidation:rule="!has(self.advertInterval) || !self.advertInterval.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$') || (((has(self.version) ? self.version : (has(self.profile) && self.profile == 'fast' ? 3 : 2)) == 2) ? (duration(self.advertInterval) >= duration('1s') && duration(self.advertInterval) <= duration('255s') && duration(self.advertInterval).getMilliseconds() % 1000 == 0) : (duration(self.advertInterval) >= duration('10ms') && duration(self.advertInterval) <= duration('40950ms') && duration(self.advertInterval).getMilliseconds() % 10 == 0))",message="VRRPv2 needs whole seconds from 1s to 255s, VRRPv3 10ms to 40.95s in steps of 10ms",fieldPath=".advertInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.avoidVirtualRouterIDs) || !has(self.virtualRouterIDs) || self.avoidVirtualRouterIDs.all(id, !self.virtualRouterIDs.exists(k, self.virtualRouterIDs[k] == id))",message="an ID both avoided and pinned in virtualRouterIDs",fieldPath=".avoidVirtualRouterIDs"
type VRRPSpec struct {
	// Mode is "unicast" (default: works where multicast is blocked) or
	// "multicast".
	// +kubebuilder:default=unicast
	// +kubebuilder:validation:Enum=unicast;multicast
	Mode string `json:"mode,omitempty"`
	// Profile is "default" (1 s adverts) or "fast" (VRRPv3, 100 ms
	// adverts: a lost node's VIPs move in about a third of a second).
	// +kubebuilder:default=default
	// +kubebuilder:validation:Enum=default;fast
	Profile string `json:"profile,omitempty"`
	// AdvertInterval overrides the profile's interval, e.g. "1s", "200ms".
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	AdvertInterval string `json:"advertInterval,omitempty"`
	// Version is the VRRP version for IPv4 instances: 2 or 3. IPv6 always
	// uses 3. Default: 2 for the default profile, 3 for fast.
	// +kubebuilder:validation:Enum=2;3
	Version int `json:"version,omitempty"`
	// Interface is the node interface VRRP runs on when a node names none.
	// Default br-ex.
	// +kubebuilder:default=br-ex
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,15}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="must be a network interface name"
	Interface string `json:"interface,omitempty"`
	// VirtualRouterIDs pins IDs by instance key: "api", "ingress" (the
	// default controller), "ingress/<name>", "pool/<name>/<n>".
	// +kubebuilder:validation:MaxProperties=255
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 1 && self[k] <= 255)",message="IDs must be between 1 and 255"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.all(j, j == k || self[j] != self[k]))",message="two instances pinned to one ID"
	VirtualRouterIDs map[string]int `json:"virtualRouterIDs,omitempty"`
	// AvoidVirtualRouterIDs are never handed out (other routers on the LAN).
	// +listType=set
	// +kubebuilder:validation:MaxItems=255
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=255
	AvoidVirtualRouterIDs []int `json:"avoidVirtualRouterIDs,omitempty"`
}

// Images are the container images of the static pods. Each defaults to
// vipctl's own image, quay.io/vipctl/vipctl tagged with the version of the
// vipctl that renders (docs/image.md), which carries keepalived, haproxy and
// vipctl alike; set them to a mirror for a disconnected cluster.
type Images struct {
	// Keepalived runs VRRP on every node that may hold a VIP. Default:
	// vipctl's image.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*(:[A-Za-z0-9_.-]+)?(@sha256:[a-f0-9]{64})?$`
	Keepalived string `json:"keepalived,omitempty"`
	// Haproxy balances the API on control-plane nodes. Default: vipctl's
	// image.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*(:[A-Za-z0-9_.-]+)?(@sha256:[a-f0-9]{64})?$`
	Haproxy string `json:"haproxy,omitempty"`
	// Vipctl runs the runtimecfg sidecar and its init container. Default:
	// vipctl's image.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*(:[A-Za-z0-9_.-]+)?(@sha256:[a-f0-9]{64})?$`
	Vipctl string `json:"vipctl,omitempty"`
}
