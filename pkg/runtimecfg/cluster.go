package runtimecfg

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
)

// Effective merges the day-2 parts of the live ConfigMap's config (service
// pools and VRRP ID pins) into the static config the MachineConfig laid
// down. Everything else comes from the file: changing it needs new files
// on the nodes, which only a MachineConfig rollout brings. drift tells
// whether the ConfigMap's static parts differ from the file's (an update
// whose MachineConfigs have not reached this node yet).
func Effective(static, live *v1alpha1.ClusterVIPs) (c *v1alpha1.ClusterVIPs, drift bool, err error) {
	// A shallow copy is enough: the day-2 fields are replaced, never
	// modified in place.
	cp := *static
	out := &cp
	if live == nil {
		return out, false, nil
	}
	out.Spec.ServicePools = live.Spec.ServicePools
	out.Spec.VRRP.VirtualRouterIDs = live.Spec.VRRP.VirtualRouterIDs
	out.Spec.VRRP.AvoidVirtualRouterIDs = live.Spec.VRRP.AvoidVirtualRouterIDs
	if errs := v1alpha1.Validate(out); len(errs) > 0 {
		return nil, false, &v1alpha1.ValidationError{Errors: errs}
	}
	return out, !equalYAML(out, live), nil
}

func equalYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// ParseConfigMap decodes the ClusterVIPs held in the vipctl ConfigMap.
func ParseConfigMap(cm *corev1.ConfigMap) (*v1alpha1.ClusterVIPs, error) {
	data, ok := cm.Data[v1alpha1.ConfigMapKey]
	if !ok {
		return nil, fmt.Errorf("configmap %s/%s: no key %q", cm.Namespace, cm.Name, v1alpha1.ConfigMapKey)
	}
	c, err := v1alpha1.Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return c, nil
}

// Served tells whether vipctl serves a Service: type LoadBalancer with no
// loadBalancerClass or ours.
func Served(s *corev1.Service) bool {
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	return s.Spec.LoadBalancerClass == nil || *s.Spec.LoadBalancerClass == v1alpha1.LoadBalancerClass
}

// ServiceVIPs sorts the addresses in served Services' status into the
// pools that contain them. Addresses in no pool are returned apart: a pool
// that shrank under an allocated Service (vipctl update refuses that unless
// forced). The result is sorted and free of duplicates (shared IPs).
func ServiceVIPs(c *v1alpha1.ClusterVIPs, services []*corev1.Service) (byPool map[string][]netip.Addr, orphans []netip.Addr) {
	byPool, _, orphans = sortServiceVIPs(c, services)
	return byPool, orphans
}

// isLocal tells whether a Service's traffic may only go to local
// endpoints.
func isLocal(s *corev1.Service) bool {
	return s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// LocalServices lists the served Services with externalTrafficPolicy Local
// that have addresses in a pool, oldest first (so a new one is appended
// and takes a VRRP ID without moving the others'), each with the nodes
// that run a ready endpoint. slices maps namespace/name to the Service's
// EndpointSlices.
func LocalServices(c *v1alpha1.ClusterVIPs, services []*corev1.Service, slices map[string][]*discoveryv1.EndpointSlice) []render.LocalService {
	_, local, _ := sortServiceVIPs(c, services)
	for i := range local {
		on := map[string]bool{}
		for _, es := range slices[local[i].Name] {
			for _, e := range es.Endpoints {
				if e.NodeName != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					on[*e.NodeName] = true
				}
			}
		}
		for n := range on {
			local[i].Nodes = append(local[i].Nodes, n)
		}
		sort.Strings(local[i].Nodes)
	}
	return local
}

// sortServiceVIPs splits served Services' addresses into pool addresses
// (Cluster policy), Local Services, and addresses in no pool.
func sortServiceVIPs(c *v1alpha1.ClusterVIPs, services []*corev1.Service) (byPool map[string][]netip.Addr, local []render.LocalService, orphans []netip.Addr) {
	services = slices.Clone(services)
	sort.SliceStable(services, func(i, j int) bool {
		a, b := services[i], services[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	type poolRanges struct {
		name   string
		ranges []v1alpha1.AddressRange
	}
	var pools []poolRanges
	for _, p := range c.Spec.ServicePools {
		pr := poolRanges{name: p.Name}
		for _, a := range p.Addresses {
			r, err := v1alpha1.ParseAddressRange(a)
			if err == nil {
				pr.ranges = append(pr.ranges, r)
			}
		}
		pools = append(pools, pr)
	}
	byPool = map[string][]netip.Addr{}
	seen := map[netip.Addr]bool{}
	for _, s := range services {
		if !Served(s) {
			continue
		}
		var ls *render.LocalService
		if isLocal(s) {
			local = append(local, render.LocalService{Name: s.Namespace + "/" + s.Name})
			ls = &local[len(local)-1]
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(in.IP)
			if err != nil || seen[a.Unmap()] {
				continue
			}
			a = a.Unmap()
			seen[a] = true
			placed := false
			for _, p := range pools {
				if slices.ContainsFunc(p.ranges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) }) {
					if ls != nil {
						ls.Pool = p.name
						ls.VIPs = append(ls.VIPs, a)
					} else {
						byPool[p.name] = append(byPool[p.name], a)
					}
					placed = true
					break
				}
			}
			if !placed {
				orphans = append(orphans, a)
			}
		}
	}
	for _, v := range byPool {
		sort.Slice(v, func(i, j int) bool { return v[i].Less(v[j]) })
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].Less(orphans[j]) })
	local = slices.DeleteFunc(local, func(l render.LocalService) bool { return len(l.VIPs) == 0 })
	return byPool, local, orphans
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
func Nodes(objs []*corev1.Node, defaultInterface string) ([]render.Node, []error) {
	out := make([]render.Node, 0, len(objs))
	var errs []error
	for _, o := range objs {
		n, err := render.NodeFromKubernetes(o, defaultInterface)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}
