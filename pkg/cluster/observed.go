package cluster

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Class is which Services of type LoadBalancer vipctl serves
// (spec.loadBalancerClass). The zero value is the default: class
// vipctl.io/keepalived and Services without a class.
type Class struct {
	// Name is the class served; empty means v1alpha1.LoadBalancerClass.
	Name string
	// Only leaves Services without a class to another implementation.
	Only bool
}

// ClassOf is c's spec.loadBalancerClass.
func ClassOf(c *v1alpha1.ClusterVIPs) Class {
	return Class{Name: c.Spec.ServedClass(), Only: c.Spec.ClassOnly()}
}

// String is the class's name.
func (c Class) String() string {
	if c.Name == "" {
		return v1alpha1.LoadBalancerClass
	}
	return c.Name
}

// Describe says in words which Services the class serves.
func (c Class) Describe() string {
	if c.Only {
		return "class " + c.String() + " only"
	}
	return "class " + c.String() + " or none"
}

// Serves tells whether vipctl serves a Service: type LoadBalancer of the
// class, or without a class unless Only.
func (c Class) Serves(s *corev1.Service) bool {
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if s.Spec.LoadBalancerClass == nil {
		return !c.Only
	}
	return *s.Spec.LoadBalancerClass == c.String()
}

// Other tells whether a Service names another load-balancer class: all
// of its addresses, its external IPs too, are that class's business.
func (c Class) Other(s *corev1.Service) bool {
	return s.Spec.LoadBalancerClass != nil && *s.Spec.LoadBalancerClass != c.String()
}

// Reads tells whether rendering reads a Service: one vipctl serves, or
// one that names spec.externalIPs, which a pool with externalIPs may
// announce (ExternalIPs).
func (c Class) Reads(s *corev1.Service) bool { return c.Serves(s) || len(s.Spec.ExternalIPs) > 0 }

// Addressed tells whether a Service can change a render: one rendering
// reads (Reads) that has an address, in its status (one vipctl serves) or
// among its external IPs. A new Service waiting for the allocator
// renders nothing until its address comes (ServiceAddresses skips it).
func (c Class) Addressed(s *corev1.Service) bool {
	return (c.Serves(s) && len(s.Status.LoadBalancer.Ingress) > 0) || len(s.Spec.ExternalIPs) > 0
}

// ExternalIPs are the addresses of s.Spec.ExternalIPs a pool announces
// (Pools.ExternalIP). A Service of another load-balancer class is left to
// it.
func (m *Model) ExternalIPs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, e := range m.Pools.ExternalIPs(s, m.Class) {
		if e.Err == nil {
			out = append(out, e.Addr)
		}
	}
	return out
}

// ExternalIP is an address of a Service's spec.externalIPs inside a pool
// with externalIPs on.
type ExternalIP struct {
	Addr netip.Addr
	Pool *Pool
	// Err says why the pool does not announce it (nil: it does).
	Err error
}

// ExternalIPs lists the addresses of s.Spec.ExternalIPs that lie in a
// pool with externalIPs on, each with why the pool refuses it if it does:
// a namespace the pool does not admit, or one of its anchors (no Service
// gets those). Addresses in no such pool are none of vipctl's business
// (kube-proxy still answers them where they reach a node) and are left
// out, as is every address of a Service of another load-balancer class.
func (ps Pools) ExternalIPs(s *corev1.Service, c Class) []ExternalIP {
	if c.Other(s) {
		return nil
	}
	var out []ExternalIP
	for _, ip := range s.Spec.ExternalIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		a = a.Unmap()
		p := ps.Of(a)
		if p == nil || !p.ExternalIPs {
			continue
		}
		e := ExternalIP{Addr: a, Pool: p}
		switch {
		case !p.AdmitsNamespace(s.Namespace):
			e.Err = fmt.Errorf("external IP %s: pool %s admits Services of namespaces %s only", a, p.Name, strings.Join(p.Namespaces, ", "))
		case p.IsAnchor(a):
			e.Err = fmt.Errorf("external IP %s is an anchor of pool %s (the address of its VRRP instance), which no Service gets", a, p.Name)
		}
		out = append(out, e)
	}
	return out
}

// isLocal tells whether a Service's traffic may only go to local
// endpoints.
func isLocal(s *corev1.Service) bool {
	return s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// NamespacedName is how Services are named everywhere: namespace/name.
func NamespacedName(s *corev1.Service) string { return s.Namespace + "/" + s.Name }

// SortByAge orders Services oldest first (name breaks ties), in place:
// the order in which they claim addresses and VRRP IDs, so that a new
// Service is appended and never moves an older one's.
func SortByAge(services []*corev1.Service) {
	sort.SliceStable(services, func(i, j int) bool {
		a, b := services[i], services[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return NamespacedName(a) < NamespacedName(b)
	})
}

// ServiceAddresses sorts the addresses in served Services' status, and
// the external IPs pools announce (ExternalIPs): into
// the pools that contain them (Cluster policy), into Local Services (each
// its own VRRP instance, oldest first so a new one takes a VRRP ID without
// moving the others'), and apart, the orphans in no pool (a pool that
// shrank under an allocated Service: vipctl update refuses that unless
// forced). Results are sorted and free of duplicates (shared IPs). Local
// Services' Nodes are left empty (see Endpoints).
func (m *Model) ServiceAddresses(services []*corev1.Service) (byPool map[string][]netip.Addr, local []LocalService, orphans []netip.Addr) {
	services = slices.Clone(services)
	SortByAge(services)
	byPool = map[string][]netip.Addr{}
	seen := map[netip.Addr]bool{}
	for _, s := range services {
		if !m.Class.Reads(s) {
			continue
		}
		addrs := m.addresses(s)
		var ls *LocalService
		if isLocal(s) {
			local = append(local, LocalService{Name: NamespacedName(s), HealthCheckNodePort: s.Spec.HealthCheckNodePort})
			ls = &local[len(local)-1]
		}
		for _, a := range addrs {
			if seen[a] {
				continue
			}
			seen[a] = true
			p := m.PoolOf(a)
			switch {
			case p == nil:
				orphans = append(orphans, a)
			case ls != nil:
				ls.Pool = p.Name
				ls.VIPs = append(ls.VIPs, a)
			default:
				byPool[p.Name] = append(byPool[p.Name], a)
			}
		}
	}
	for _, v := range byPool {
		sort.Slice(v, func(i, j int) bool { return v[i].Less(v[j]) })
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].Less(orphans[j]) })
	local = slices.DeleteFunc(local, func(l LocalService) bool { return len(l.VIPs) == 0 })
	return byPool, local, orphans
}

// addresses are the addresses of a Service rendering reads (Read): those
// in its status if vipctl serves it, and the external IPs pools announce.
func (m *Model) addresses(s *corev1.Service) []netip.Addr {
	var addrs []netip.Addr
	if m.Class.Serves(s) {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	return append(addrs, m.ExternalIPs(s)...)
}

// Follower is a Service address that follows its instance's anchor: the
// sidecar puts it on the interface of the node that holds Anchor (a pool
// with announce: sidecar).
type Follower struct {
	Addr, Anchor netip.Addr
}

// Followers are the addresses of s that follow an anchor, each with it,
// as a render places them (onnode.HandoverInstance.Sidecar): a Service
// with externalTrafficPolicy Cluster (a Local Service's addresses take a
// VRRP instance of their own), in a pool with announce: sidecar, not an
// anchor. It reads s alone, so the sidecar can add a new Service's
// address before the render that follows (LocalVIPs.AddEarly); a render
// still decides, since an address two Services claim is the older's.
func (m *Model) Followers(s *corev1.Service) []Follower {
	if !m.Class.Reads(s) || isLocal(s) {
		return nil
	}
	var out []Follower
	for _, a := range m.addresses(s) {
		p := m.PoolOf(a)
		if p == nil || !p.SidecarAnnounced() || p.IsAnchor(a) {
			continue
		}
		if anchor, ok := p.AnchorOf(a); ok {
			out = append(out, Follower{Addr: a, Anchor: anchor})
		}
	}
	return out
}

// Endpoints fills each Local Service's Nodes (the nodes that run a ready
// endpoint of it), Draining (those that run only terminating endpoints
// that still serve) and Unready (those that run only endpoints neither
// ready nor terminating). slices maps namespace/name to the Service's
// EndpointSlices.
func Endpoints(local []LocalService, slices map[string][]*discoveryv1.EndpointSlice) {
	for i := range local {
		ready, draining, unready := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, es := range slices[local[i].Name] {
			for _, e := range es.Endpoints {
				switch c := e.Conditions; {
				case e.NodeName == nil:
				case c.Ready == nil || *c.Ready:
					ready[*e.NodeName] = true
				case c.Terminating != nil && *c.Terminating:
					if c.Serving != nil && *c.Serving {
						draining[*e.NodeName] = true
					}
				default:
					unready[*e.NodeName] = true
				}
			}
		}
		local[i].Nodes = sortedKeys(local[i].Nodes[:0], ready, nil)
		local[i].Draining = sortedKeys(local[i].Draining[:0], draining, ready)
		unready = without(unready, draining)
		local[i].Unready = sortedKeys(local[i].Unready[:0], unready, ready)
	}
}

// sortedKeys appends the keys of set that are not in but to out, sorted.
func sortedKeys(out []string, set, but map[string]bool) []string {
	for n := range set {
		if !but[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// without is set less the keys of but.
func without(set, but map[string]bool) map[string]bool {
	for n := range but {
		delete(set, n)
	}
	return set
}

// SlicesByService groups EndpointSlices by the namespace/name of the
// Service they belong to.
func SlicesByService(objs []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	out := map[string][]*discoveryv1.EndpointSlice{}
	for _, es := range objs {
		name := SliceService(es)
		out[name] = append(out[name], es)
	}
	return out
}

// SliceService is the namespace/name of the Service an EndpointSlice
// belongs to.
func SliceService(es *discoveryv1.EndpointSlice) string {
	return es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]
}

// apiServerService is the Service whose EndpointSlices list the
// apiservers.
const apiServerService = "default/kubernetes"

// SlicesRead tells whether Observe reads the EndpointSlices of the
// Service name (namespace/name; svc is that Service, nil when unknown):
// the apiservers' and those of served Local Services. Changes to any
// other Service's slices (every Cluster-policy Service's) cannot change
// the render, and the sidecar does not render for them; a Service that
// turns Local is itself a change that renders.
func (c Class) SlicesRead(name string, svc *corev1.Service) bool {
	return name == apiServerService || (svc != nil && c.Reads(svc) && isLocal(svc))
}

// RouterPlacement tells, for one IngressController, on which nodes its
// router pods are scheduled (ready or not) and whether one on node is
// ready.
func RouterPlacement(pods []*corev1.Pod, node string) (nodes []string, readyHere bool) {
	on := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		on[p.Spec.NodeName] = true
		if p.Spec.NodeName == node && podReady(p) {
			readyHere = true
		}
	}
	for n := range on {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return nodes, readyHere
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// APIServers lists the ready endpoint addresses of the default/kubernetes
// EndpointSlices.
func APIServers(slices []*discoveryv1.EndpointSlice) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || seen[ip.Unmap()] {
					continue
				}
				seen[ip.Unmap()] = true
				out = append(out, ip.Unmap())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Nodes converts Node objects, skipping (and reporting) the ones that
// cannot take part yet (no address reported).
func Nodes(objs []*corev1.Node, defaultInterface string) ([]Node, []error) {
	out := make([]Node, 0, len(objs))
	var errs []error
	for _, o := range objs {
		n, err := NodeFromKubernetes(o, defaultInterface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}

// Observed is what the sidecar's caches hold, narrowed to what rendering
// reads.
type Observed struct {
	Nodes    []*corev1.Node
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	// Routers holds, per IngressController, its router pods.
	Routers map[string][]*corev1.Pod
	// Self is the node that observes (the sidecar's own), whose routers'
	// readiness Observation.ReadyHere tells; empty for a cluster-wide view.
	Self string
}

// Observation is the render State made of what was observed, with what
// was left out and why.
type Observation struct {
	State State
	// Skipped are the objects left out: nodes without addresses,
	// addresses a Service must not have.
	Skipped []error
	// Orphans are Service addresses in no pool.
	Orphans []netip.Addr
	// ReadyHere says, per IngressController, whether a ready router pod
	// runs on Observed.Self: the same look at the pods that placed the
	// routers in State.RouterNodes.
	ReadyHere map[string]bool
}

// dropReserved keeps a node's own address and its network's network and
// broadcast addresses out of what is announced, whoever wrote them into a
// Service's status: held by another node, a node's address takes that
// node's traffic. The allocator never gives these out; this is the last
// line, and the only one that knows the nodes' addresses at run time.
func (m *Model) dropReserved(st *State) []error {
	reserved := map[netip.Addr]string{}
	for _, r := range m.Config.ReservedAddresses(Addresses(st.Nodes)) {
		reserved[r.Addr] = r.Why
	}
	var errs []error
	keep := func(a netip.Addr) bool {
		why, bad := reserved[a]
		if bad {
			errs = append(errs, fmt.Errorf("service address %s is %s: not announced", a, why))
		}
		return !bad
	}
	for pool, vips := range st.ServiceVIPs {
		st.ServiceVIPs[pool] = slices.DeleteFunc(vips, func(a netip.Addr) bool { return !keep(a) })
	}
	for i := range st.LocalServices {
		ls := &st.LocalServices[i]
		ls.VIPs = slices.DeleteFunc(ls.VIPs, func(a netip.Addr) bool { return !keep(a) })
	}
	st.LocalServices = slices.DeleteFunc(st.LocalServices, func(l LocalService) bool { return len(l.VIPs) == 0 })
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// Observe turns the observed objects into the render State.
// A controller whose routers are nowhere yet (or on one node) keeps every
// node its routers may run on (its nodeSelector) as a candidate: an
// instance needs two members, and the track file still decides who may
// hold it.
func (m *Model) Observe(o Observed) Observation {
	var out Observation
	st := &out.State
	st.Nodes, out.Skipped = Nodes(o.Nodes, m.Config.Spec.VRRP.Interface)
	st.RouterNodes = map[string][]string{}
	st.ServiceVIPs, st.LocalServices, out.Orphans = m.ServiceAddresses(o.Services)
	out.Skipped = append(out.Skipped, m.dropReserved(st)...)
	out.ReadyHere = map[string]bool{}
	for name, pods := range o.Routers {
		placed, readyHere := RouterPlacement(pods, o.Self)
		if len(placed) >= 2 {
			st.RouterNodes[name] = placed
		}
		out.ReadyHere[name] = readyHere
	}
	bySvc := SlicesByService(o.Slices)
	st.APIServers = APIServers(bySvc[apiServerService])
	Endpoints(st.LocalServices, bySvc)
	return out
}
