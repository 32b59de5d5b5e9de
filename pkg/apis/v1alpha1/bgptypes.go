package v1alpha1

// BGPSpec is the nodes' side of the BGP sessions that announce the
// addresses of bgp pools. FRR (bgpd) runs the sessions; see docs/bgp.md.
//
// +kubebuilder:validation:XValidation:rule="!has(self.peers) || !has(self.asn) || self.peers.all(p, !has(p.ebgpMultihop) || p.ebgpMultihop == 0 || p.asn != self.asn)",message="ebgpMultihop is only for eBGP: a peer whose asn is spec.bgp.asn (iBGP) goes any number of hops",fieldPath=".peers"
type BGPSpec struct {
	// ASN is the nodes' autonomous system number (the same on every node).
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	ASN uint32 `json:"asn"`
	// Peers are the routers the nodes announce to. Each is named by its
	// address or, unnumbered, by the nodes' interface it is on; an
	// address is named once.
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.address) || self.exists_one(q, has(q.address) && q.address == p.address))",message="an address is named by one peer"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Peers []BGPPeer `json:"peers"`
	// Communities are attached to every announced route, "AA:NN" or one
	// of no-export, no-advertise, local-AS.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=12
	// +kubebuilder:validation:items:XValidation:rule="self in ['no-export', 'no-advertise', 'local-AS'] || (self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && int(self.split(':')[0]) <= 65535 && int(self.split(':')[1]) <= 65535)",message="must be AA:NN (each 0-65535) or one of no-export, no-advertise, local-AS"
	Communities []string `json:"communities,omitempty"`
	// GracefulRestartTime is the restart time the nodes announce to the
	// peers with gracefulRestart: how long a router keeps a node's routes
	// (stale) after its FRR stopped cleanly, until the session is back.
	// Whole seconds, 1s to 4095s (RFC 4724's 12 bits). Default 30s: time
	// for the frr container to restart, while a node that stops for good
	// without a drain (a shutdown) keeps attracting traffic no longer.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	GracefulRestartTime string `json:"gracefulRestartTime,omitempty"`
}

// BGPPeer is one upstream router.
//
// +kubebuilder:validation:XValidation:rule="has(self.address) != has(self.interface)",message="name the router by address or by interface (unnumbered), one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.ebgpMultihop) || self.ebgpMultihop == 0",message="an unnumbered peer is on the link: ebgpMultihop is for a router hops away",fieldPath=".ebgpMultihop"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || !has(self.dualStack) || !self.dualStack",message="an unnumbered session carries both families already",fieldPath=".dualStack"
// +kubebuilder:validation:XValidation:rule="!has(self.holdTime) || !self.holdTime.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$') || (duration(self.holdTime) >= duration('3s') && duration(self.holdTime) <= duration('65535s') && duration(self.holdTime).getMilliseconds() % 1000 == 0)",message="must be whole seconds from 3s (RFC 4271) to 65535s",fieldPath=".holdTime"
// +kubebuilder:validation:XValidation:rule="!has(self.keepaliveTime) || !self.keepaliveTime.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$') || (duration(self.keepaliveTime) >= duration('1s') && duration(self.keepaliveTime) <= duration('65535s') && duration(self.keepaliveTime).getMilliseconds() % 1000 == 0 && (!has(self.holdTime) || !self.holdTime.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$') || duration(self.keepaliveTime) < duration(self.holdTime)))",message="must be whole seconds, at least 1s and less than holdTime",fieldPath=".keepaliveTime"
type BGPPeer struct {
	// Address is the router's address, IPv4 or IPv6, on a subnet the
	// selected nodes reach directly (eBGP, single hop), or, with
	// ebgpMultihop, through routers. Either address or interface.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address, without a zone"
	Address string `json:"address,omitempty"`
	// Interface makes the session unnumbered (FRR's `neighbor IFNAME
	// interface`): the router is the one at the far end of this node
	// interface, a point-to-point link to a top-of-rack port, reached at
	// the IPv6 link-local address its router advertisements carry; no
	// address is configured for it. The session carries both families:
	// IPv6 routes, and IPv4 routes with an IPv6 next hop (RFC 8950,
	// extended next hop). The nodes advertise themselves on that
	// interface with a router lifetime of 0, so no host takes a node for
	// its default router. Either address or interface; not with
	// ebgpMultihop. Two peers may name one interface for different
	// nodes (nodeSelector); a node both select peers with the first.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]{1,15}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..' && !isIP(self)",message="must be a network interface name (an address goes in address)"
	Interface string `json:"interface,omitempty"`
	// DualStack makes a session to an address carry the other family's
	// routes too (as MetalLB's dualStackAddressFamily): over an IPv4
	// session the pool's IPv6 routes, with the node's IPv6 address on
	// the session's interface as their next hop (the node needs one);
	// over an IPv6 session its IPv4 routes, with an IPv6 next hop (RFC
	// 8950, extended next hop). For a router reached over one family
	// alone. An unnumbered session carries both already.
	DualStack bool `json:"dualStack,omitempty"`
	// ASN is the router's autonomous system number; spec.bgp.asn makes
	// the session iBGP (a route reflector, say).
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	ASN uint32 `json:"asn"`
	// HoldTime is how long the router keeps a silent node's routes, in
	// whole seconds, at least 3s. Default 9s: a node that dies without a
	// word is withdrawn within it (BFD withdraws in well under a second).
	// +kubebuilder:default="9s"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	HoldTime string `json:"holdTime,omitempty"`
	// KeepaliveTime is the interval between keepalives, less than
	// holdTime. Default a third of holdTime.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	KeepaliveTime string `json:"keepaliveTime,omitempty"`
	// BFD runs a BFD session beside the BGP one, so a lost node is
	// withdrawn in under a second rather than after holdTime.
	BFD bool `json:"bfd,omitempty"`
	// GracefulRestart announces BGP graceful restart (RFC 4724) with the
	// forwarding state kept: when the node's FRR stops cleanly and comes
	// back (the frr container restarts, vipctl is upgraded) a router that
	// helps keeps the node's routes, marked stale, for up to
	// spec.bgp.gracefulRestartTime, instead of withdrawing them. A node
	// that dies is still withdrawn at once when the router notices (hold
	// timer, BFD): the nodes do not announce RFC 8538's N bit, so the
	// router's NOTIFICATION ends the restart (docs/bgp.md, "Graceful
	// restart").
	GracefulRestart bool `json:"gracefulRestart,omitempty"`
	// NodeSelector picks the nodes that peer with this router (one per
	// rack, say). Empty means every node.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// EBGPMultihop is the TTL of the session's packets for a router that
	// is not on the nodes' own subnet (eBGP multi-hop, as FRR's `neighbor
	// ebgp-multihop` and Cilium's `ebgpMultihop`): 2 to 255, the routed
	// hops to the router plus one. Default (0): the router is directly
	// connected and the TTL is 1. Not for an iBGP peer (asn equal to
	// spec.bgp.asn), whose sessions go any number of hops.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +kubebuilder:validation:XValidation:rule="self != 1",message="must be 2 to 255 (the hops to the router plus one), or left out for a router on the nodes' subnet"
	EBGPMultihop int32 `json:"ebgpMultihop,omitempty"`
	// PasswordSecret names a Secret in vipctl's namespace (vipctl-system)
	// whose key `password` is the session's TCP MD5 password (RFC 2385),
	// the one the router's neighbor has: 1 to 80 printable ASCII
	// characters without blanks. The sidecars read it (get on that Secret
	// alone, docs/permissions.md) and write it only into the node's
	// frr.conf (mode 0600); it is in no ConfigMap, MachineConfig, log or
	// support bundle. A changed Secret reaches FRR within 10 s (docs/bgp.md).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PasswordSecret string `json:"passwordSecret,omitempty"`
}

// PoolBGP is the routing policy of one bgp pool's routes, as MetalLB's
// BGPAdvertisement: the nodes' outbound route-map sets it on every route
// whose address lies in the pool.
type PoolBGP struct {
	// Peers are addresses of spec.bgp.peers (or, for an unnumbered peer,
	// its interface) that get the pool's routes; the other peers never
	// do (a pool for the DMZ routers alone). Empty: every peer.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || self.matches('^[A-Za-z0-9_.-]{1,15}$') && self != '.' && self != '..'",message="must be an IPv4 or IPv6 address, without a zone, or an unnumbered peer's interface"
	Peers []string `json:"peers,omitempty"`
	// Communities are attached to the pool's routes besides
	// spec.bgp.communities, "AA:NN" or one of no-export, no-advertise,
	// local-AS.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=12
	// +kubebuilder:validation:items:XValidation:rule="self in ['no-export', 'no-advertise', 'local-AS'] || (self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && int(self.split(':')[0]) <= 65535 && int(self.split(':')[1]) <= 65535)",message="must be AA:NN (each 0-65535) or one of no-export, no-advertise, local-AS"
	Communities []string `json:"communities,omitempty"`
	// LargeCommunities (RFC 8092) are attached to the pool's routes,
	// "GLOBAL:LOCAL1:LOCAL2", each part 0-4294967295: the form a 4-byte
	// ASN's operator uses.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$`
	// +kubebuilder:validation:items:XValidation:rule="!self.matches('^[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') || self.split(':').all(x, int(x) <= 4294967295)",message="each of the three parts must be 0-4294967295"
	LargeCommunities []string `json:"largeCommunities,omitempty"`
	// LocalPref is the LOCAL_PREF of the pool's routes to iBGP peers (asn
	// equal to spec.bgp.asn), which prefer the highest; an eBGP peer
	// never receives it (RFC 4271, 5.1.5), so at least one of the pool's
	// peers must be iBGP. At least 1: backup routes go to iBGP peers at 0
	// (docs/bgp.md). Unset: the peers' own default (100 on most).
	// +kubebuilder:validation:Format=int64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	LocalPref *uint32 `json:"localPref,omitempty"`
	// ASPathPrepend repeats the nodes' ASN this many more times (1-10) on
	// the pool's routes, so that routers prefer another site announcing
	// the same addresses with a shorter path. Not with an iBGP peer among
	// the pool's peers, which would drop the routes (their path would
	// hold its own AS). Default 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	ASPathPrepend int32 `json:"asPathPrepend,omitempty"`
	// AggregationLength makes the nodes announce, instead of each /32 of
	// a Service whose externalTrafficPolicy is Cluster, the /N covering
	// it (MetalLB's aggregationLength): fewer routes in the routers' tables.
	// It may not be shorter than any of the pool's IPv4 CIDRs (their
	// prefix length) or the CIDRs a range splits into, so the aggregate
	// never covers another pool. A Local Service's address keeps its /32,
	// so the routers' longest match still sends its traffic only to nodes
	// with an endpoint. Default 32 (no aggregation).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	AggregationLength int32 `json:"aggregationLength,omitempty"`
	// AggregationLengthV6 is aggregationLength for IPv6 addresses.
	// Default 128.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	AggregationLengthV6 int32 `json:"aggregationLengthV6,omitempty"`
}
