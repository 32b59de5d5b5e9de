package cluster

import "net/netip"

// State is what rendering knows about the running cluster. `vipctl render`
// fills Nodes from --nodes; --once from the bootstrap node list; the
// sidecar fills everything from the API (Observe).
type State struct {
	Nodes []Node
	// ServiceVIPs are the addresses allocated to Services, by pool name.
	ServiceVIPs map[string][]netip.Addr
	// RouterNodes names, per IngressController, the nodes its router pods
	// are scheduled on (ready or not). When a controller is listed, only
	// those nodes take part in its VRRP instance: in a large cluster the
	// peer list stays as short as the router deployment. Unlisted (no API
	// yet, or `vipctl render`): every node its routers may run on
	// (spec.ingress[].nodeSelector) takes part, and the track file decides.
	RouterNodes map[string][]string
	// APIServers are the addresses of the kube-apiservers that serve right
	// now (the default/kubernetes EndpointSlice). When known, haproxy
	// balances over the control-plane nodes among them; unknown or empty
	// (no API yet, or every endpoint gone), over every control-plane node,
	// and haproxy's own health checks decide.
	APIServers []netip.Addr
	// LocalServices are the served Services with externalTrafficPolicy
	// Local. Their addresses are not in ServiceVIPs: each gets a VRRP
	// instance of its own, held only where a ready endpoint runs.
	LocalServices []LocalService
	// Bootstrap is the host `vipctl bootstrap` runs on, as that command
	// sees it; nil everywhere else (a node renders the bootstrap host as
	// a peer from spec.bootstrap alone).
	Bootstrap *BootstrapHost `json:",omitempty"`
	// BGPPasswords are the passwords of spec.bgp.peers' passwordSecrets,
	// by Secret name, as the sidecar last read them. Never saved with the
	// last-good view: a node rendering from that (its init container)
	// leaves the password out of frr.conf until the sidecar reads it.
	BGPPasswords map[string]string `json:"-"`
}

// BootstrapHost is what only the bootstrap host knows about itself.
type BootstrapHost struct {
	// Interface carries its VRRP and the API VIP.
	Interface string
	// Servers are where the bootstrap machine's kube-apiserver and machine
	// config server answer, one address per family (`vipctl bootstrap
	// --bootstrap-address`): its haproxy balances over them and the
	// control-plane nodes. Empty: its own addresses (spec.bootstrap).
	Servers []netip.Addr `json:",omitempty"`
}

// LocalService is a LoadBalancer Service with externalTrafficPolicy Local:
// kube-proxy drops its traffic on nodes without a local endpoint, so its
// VIP must sit on a node that has one.
type LocalService struct {
	// Name is namespace/name.
	Name string
	// Pool holds the addresses.
	Pool string
	VIPs []netip.Addr
	// Nodes run a ready endpoint of the Service.
	Nodes []string
	// Draining run endpoints of the Service that are terminating but
	// still serving, and no ready one: a pod's graceful stop. They stay
	// in the Service's instance, in FAULT (their status file says no
	// ready endpoint), so that a holder whose pod is stopping gives the
	// VIP up with a priority 0 advert (its peer takes over at once) while
	// kube-proxy still sends what arrives to the stopping pod, rather than
	// leaving the instance by a reload, after which the peer would wait
	// for Master_Down.
	Draining []string
	// Unready run endpoints of the Service that are neither ready nor
	// terminating, and no ready or draining one: a pod whose readiness
	// probe fails, or that has not passed it yet. They stay in the
	// Service's instance too, in FAULT, for the same reason: a holder
	// whose pod fails its probe gives the VIP up with a priority 0
	// advert, and its peers, whose instance did not change, take over
	// within their skew time. Dropped from the instance, the reload on
	// every peer restarted their timers and the VIP had no holder for
	// Master_Down (3–4 s; the cluster lab's rolling upgrade, 2026-11-29).
	Unready []string `json:",omitempty"`
	// HealthCheckNodePort is the Service's spec.healthCheckNodePort, where
	// each node's service proxy (kube-proxy, OVN-Kubernetes) says how many
	// local endpoints it delivers to. Only the live sidecar asks it; the
	// last-good view does not keep it.
	HealthCheckNodePort int32 `json:"-"`
}
