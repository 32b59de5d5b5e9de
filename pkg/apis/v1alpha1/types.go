// Package v1alpha1 is the versioned input of vipctl: one ClusterVIPs document
// describes every virtual IP of a cluster. It is public so that installers
// can generate it; decoding is strict and defaults are applied in Go.
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
type ClusterVIPsSpec struct {
	// BaseDomain is the cluster's base DNS domain (api.<name>.<baseDomain>).
	BaseDomain string `json:"baseDomain"`
	// MachineNetworks are the node subnets; every VIP must sit inside one.
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
	Mode string `json:"mode,omitempty"`
	// API is the Kubernetes API VIP, held by control-plane nodes. Required
	// in mode full, left out in mode poolsOnly.
	API APISpec `json:"api"`
	// Ingress has one entry per IngressController, sharded ones included.
	// None in mode poolsOnly.
	Ingress []IngressSpec `json:"ingress,omitempty"`
	// ServicePools are address pools for Services of type LoadBalancer.
	ServicePools []ServicePool `json:"servicePools,omitempty"`
	// VRRP tunes how keepalived talks between the nodes.
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
	OpenShiftRelease string `json:"openshiftRelease,omitempty"`
	// Monitoring says which Prometheus scrapes vipctl and evaluates its
	// alerts (docs/monitoring.md). Default: OpenShift's cluster
	// monitoring.
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`
}

// APISpec describes the API VIP and the haproxy in front of kube-apiserver.
type APISpec struct {
	// VIPs holds at most one address per IP family.
	VIPs []string `json:"vips,omitempty"`
	// Port is where clients reach kube-apiserver on the VIP. Default 6443.
	Port int32 `json:"port,omitempty"`
	// InternalPort, when set (OpenShift uses 22623 for api-int's machine
	// config server), is balanced over the control plane as well.
	InternalPort int32 `json:"internalPort,omitempty"`
	// InternalLoadBalancerPort is haproxy's port for InternalPort, which the
	// machine config server holds on every control-plane node (and 22624,
	// its plain-HTTP port, too). Default 22625 when internalPort is set.
	InternalLoadBalancerPort int32 `json:"internalLoadBalancerPort,omitempty"`
	// LoadBalancerPort is where haproxy listens on every control-plane node.
	// kube-apiserver already binds Port on all addresses, so haproxy cannot
	// share it. Default 9445, as OpenShift uses.
	LoadBalancerPort int32 `json:"loadBalancerPort,omitempty"`
	// HealthPort serves haproxy's own readiness for keepalived's track
	// script. Default 9444.
	HealthPort int32 `json:"healthPort,omitempty"`
	// InternalVIPs, when set, give api-int (api-int.<cluster>.<baseDomain>,
	// which the nodes' kubelets and their Ignition fetch use) VIPs of its
	// own, at most one per family of vips: a VRRP instance of its own
	// (key api-int), held by control-plane nodes like the API VIP and
	// serving port and internalPort the same way, but answering only
	// internalAllowedSources on every port. Without it api-int resolves
	// to vips (docs/dns.md).
	InternalVIPs []string `json:"internalVIPs,omitempty"`
	// InternalAllowedSources are the clients (CIDRs) that may reach
	// internalPort, on a control-plane node's every address (the machine
	// config server hands out the cluster's secrets there, plain HTTP on
	// its port 22624 too), and any port of internalVIPs; every other
	// client's connection is refused by nftables on the node
	// (docs/security.md). The cluster's node addresses and
	// spec.bootstrap's are always allowed. Default: spec.machineNetworks.
	// Refused unless internalPort or internalVIPs is set.
	InternalAllowedSources []string `json:"internalAllowedSources,omitempty"`
}

// BootstrapSpec is the host that serves the API VIP during an install
// (`vipctl bootstrap`): the bootstrap machine itself or any host on the
// API VIP's segment.
type BootstrapSpec struct {
	// Addresses are that host's own addresses, one for each IP family of
	// spec.api.vips, each in the machine network of the API VIP of its
	// family: it sends its VRRP adverts from them, and the control-plane
	// nodes list them as unicast peers of the API instance (adverts from
	// any other address are ignored).
	Addresses []string `json:"addresses"`
}

// IngressSpec is the VIP of one IngressController. It may only sit on nodes
// that run a ready router pod of this very controller.
type IngressSpec struct {
	// Name is the IngressController's name; "default" is OpenShift's own.
	Name string `json:"name"`
	// Domain served by this controller. Defaults to apps.<cluster>.<baseDomain>
	// for "default"; required for other controllers.
	Domain string `json:"domain,omitempty"`
	// VIPs holds at most one address per IP family.
	VIPs []string `json:"vips"`
	// RouterNamespace holds the router pods. Default openshift-ingress.
	RouterNamespace string `json:"routerNamespace,omitempty"`
	// RouterSelector picks this controller's router pods. Default:
	// ingresscontroller.operator.openshift.io/deployment-ingresscontroller=<name>.
	RouterSelector map[string]string `json:"routerSelector,omitempty"`
	// NodeSelector names the nodes this controller's routers may run on:
	// the labels of the IngressController's
	// spec.nodePlacement.nodeSelector.matchLabels, copied. Only those nodes
	// take part in its VRRP instance, in `vipctl render` as in the
	// sidecar before it sees the routers: in a large cluster the peer
	// lists stay as short as the router's node pool. Empty means every
	// node (a router may be scheduled anywhere).
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// HealthPort is the router's readiness port (/healthz/ready). Default 1936.
	HealthPort int32 `json:"healthPort,omitempty"`
	// Interface puts the VIPs on this node interface (a DMZ VLAN, say)
	// instead of spec.vrrp.interface, as for a service pool's `interface`;
	// the routers are unaffected (they listen on every address).
	Interface string `json:"interface,omitempty"`
	// InterfaceLabel names a node label whose value is that interface on
	// each node, as for a service pool's `interfaceLabel`.
	InterfaceLabel string `json:"interfaceLabel,omitempty"`
}

// ServicePool is a set of addresses handed out to Services of type
// LoadBalancer and announced by keepalived on the pool's nodes.
type ServicePool struct {
	// Name is unique within the cluster; Services pick a pool by it.
	Name string `json:"name"`
	// Mode is "vrrp" (default: keepalived moves each address between the
	// nodes of one L2 segment) or "bgp" (every node that should attract a
	// Service's traffic announces its address as a /32 or /128 route to
	// the peers of spec.bgp; the nodes may sit on different subnets).
	// A bgp pool takes no VRRP instance and no VRRP ID, and its addresses
	// need not lie in a machine network.
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
	Announce string `json:"announce,omitempty"`
	// Addresses are CIDRs ("198.51.100.128/26") or inclusive ranges
	// ("198.51.100.200-198.51.100.210"), IPv4 or IPv6. The last `instances`
	// addresses of the last range of each family are the VRRP instances'
	// anchors (the only addresses in their adverts) and are never given to
	// a Service (a bgp pool has no instances and no anchors).
	Addresses []string `json:"addresses"`
	// NodeSelector picks the nodes that may hold this pool's VIPs. Empty
	// means every node that runs keepalived.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Namespaces that may draw from this pool. Empty means all.
	Namespaces []string `json:"namespaces,omitempty"`
	// ServiceSelector restricts the pool to Services with these labels.
	// The labels are set by whoever owns the Service, so this selects; it
	// does not protect: use namespaces to keep a tenant out.
	ServiceSelector map[string]string `json:"serviceSelector,omitempty"`
	// MaxPerNamespace caps how many Services of one namespace may hold an
	// address of this pool, so that one tenant cannot drain it for all.
	// Default 0: no cap.
	MaxPerNamespace int `json:"maxPerNamespace,omitempty"`
	// ShareAcrossNamespaces lets Services of different namespaces share
	// one address through the vipctl.io/allow-shared-ip annotation. Off
	// by default: the sharing key is then scoped to one namespace, so a
	// Service elsewhere that guesses a key cannot join another tenant's
	// address.
	ShareAcrossNamespaces bool `json:"shareAcrossNamespaces,omitempty"`
	// AutoAssign lets Services without an explicit pool draw from it.
	// Default true.
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
	Interface string `json:"interface,omitempty"`
	// InterfaceLabel names a node label whose value is that interface on
	// each node, for nodes whose names for it differ; a node without the
	// label holds none of the pool's VIPs. Not together with interface.
	InterfaceLabel string `json:"interfaceLabel,omitempty"`
	// Instances is the number of VRRP instances per IP family the pool's
	// VIPs are spread over; each gets other node priorities so the VIPs are
	// held by different nodes at once. Default 2. Unused by bgp pools.
	Instances int `json:"instances,omitempty"`
	// MaxHolders caps how many of the selected nodes take part in each of
	// the pool's VRRP instances (the ones with the highest hashed priority
	// for that instance). Seven backups are plenty; every extra member
	// costs a unicast peer on every node. Default 8. Unused by bgp pools,
	// where every node the nodeSelector picks announces.
	MaxHolders int `json:"maxHolders,omitempty"`
}

// VRRPSpec tunes VRRP between the nodes.
type VRRPSpec struct {
	// Mode is "unicast" (default: works where multicast is blocked) or
	// "multicast".
	Mode string `json:"mode,omitempty"`
	// Profile is "default" (1 s adverts) or "fast" (VRRPv3, 100 ms
	// adverts: a lost node's VIPs move in about a third of a second).
	Profile string `json:"profile,omitempty"`
	// AdvertInterval overrides the profile's interval, e.g. "1s", "200ms".
	AdvertInterval string `json:"advertInterval,omitempty"`
	// Version is the VRRP version for IPv4 instances: 2 or 3. IPv6 always
	// uses 3. Default: 2 for the default profile, 3 for fast.
	Version int `json:"version,omitempty"`
	// Interface is the node interface VRRP runs on when a node names none.
	// Default br-ex.
	Interface string `json:"interface,omitempty"`
	// VirtualRouterIDs pins IDs by instance key: "api", "ingress" (the
	// default controller), "ingress/<name>", "pool/<name>/<n>".
	VirtualRouterIDs map[string]int `json:"virtualRouterIDs,omitempty"`
	// AvoidVirtualRouterIDs are never handed out (other routers on the LAN).
	AvoidVirtualRouterIDs []int `json:"avoidVirtualRouterIDs,omitempty"`
}

// BGPSpec is the nodes' side of the BGP sessions that announce the
// addresses of bgp pools. FRR (bgpd) runs the sessions; see docs/bgp.md.
type BGPSpec struct {
	// ASN is the nodes' autonomous system number (the same on every node).
	ASN uint32 `json:"asn"`
	// Peers are the routers the nodes announce to.
	Peers []BGPPeer `json:"peers"`
	// Communities are attached to every announced route, "AA:NN" or one
	// of no-export, no-advertise, local-AS.
	Communities []string `json:"communities,omitempty"`
}

// BGPPeer is one upstream router.
type BGPPeer struct {
	// Address is the router's address, IPv4 or IPv6, on a subnet the
	// selected nodes reach directly (eBGP, single hop).
	Address string `json:"address"`
	// ASN is the router's autonomous system number.
	ASN uint32 `json:"asn"`
	// HoldTime is how long the router keeps a silent node's routes, in
	// whole seconds, at least 3s. Default 9s: a node that dies without a
	// word is withdrawn within it (BFD withdraws in well under a second).
	HoldTime string `json:"holdTime,omitempty"`
	// KeepaliveTime is the interval between keepalives, less than
	// holdTime. Default a third of holdTime.
	KeepaliveTime string `json:"keepaliveTime,omitempty"`
	// BFD runs a BFD session beside the BGP one, so a lost node is
	// withdrawn in under a second rather than after holdTime.
	BFD bool `json:"bfd,omitempty"`
	// NodeSelector picks the nodes that peer with this router (one per
	// rack, say). Empty means every node.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Images are the container images of the static pods. Each defaults to
// vipctl's own image, quay.io/vipctl/vipctl tagged with the version of the
// vipctl that renders (docs/image.md), which carries keepalived, haproxy and
// vipctl alike; set them to a mirror for a disconnected cluster.
type Images struct {
	// Keepalived runs VRRP on every node that may hold a VIP. Default:
	// vipctl's image.
	Keepalived string `json:"keepalived,omitempty"`
	// Haproxy balances the API on control-plane nodes. Default: vipctl's
	// image.
	Haproxy string `json:"haproxy,omitempty"`
	// Vipctl runs the runtimecfg sidecar and its init container. Default:
	// vipctl's image.
	Vipctl string `json:"vipctl,omitempty"`
}
