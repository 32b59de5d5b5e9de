package render

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// addAPI adds the API VIP's instance (not in mode poolsOnly) and
// api-int's, with haproxy's check script.
func (p *Plan) addAPI(fall, rise int) error {
	s := &p.c.Spec
	if p.HasAPI() {
		haproxyCmd := fmt.Sprintf("%s/%s %d %s", p.root+onnode.ScriptsDir, keepalived.CheckHTTP, s.API.HealthPort, haproxyReadyPath)
		p.scripts = append(p.scripts, keepalived.Script{Name: haproxyScriptName, Command: haproxyCmd, Interval: scriptInterval, Timeout: scriptTimeout, Fall: fall, Rise: rise})
		if err := p.add(instanceSpec{key: v1alpha1.KeyAPI, vips: p.model.API, eligible: func(n *cluster.Node) bool { return n.ControlPlane },
			scripts: []string{haproxyScriptName}, why: "held by a control-plane node whose haproxy can reach a kube-apiserver", routed: s.API.Routed}); err != nil {
			return err
		}
	}
	if len(s.API.InternalVIPs) > 0 {
		if err := p.add(instanceSpec{key: v1alpha1.KeyAPIInternal, vips: p.model.APIInternal, eligible: func(n *cluster.Node) bool { return n.ControlPlane },
			scripts: []string{haproxyScriptName}, why: "api-int, for the cluster's nodes only: held by a control-plane node whose haproxy can reach a kube-apiserver", routed: s.API.Routed}); err != nil {
			return err
		}
	}
	return nil
}

// addIngress adds the instance of the i-th IngressController, with its
// check script and the track file the sidecar writes.
func (p *Plan) addIngress(i int, in v1alpha1.IngressSpec, fall, rise int) error {
	script := "chk_ingress_" + scriptSafe(in.Name)
	track := "ingress_" + scriptSafe(in.Name)
	p.scripts = append(p.scripts, keepalived.Script{Name: script, Command: fmt.Sprintf("%s/%s %d %s", p.root+onnode.ScriptsDir, keepalived.CheckHTTP, in.HealthPort, routerReadyPath),
		Interval: scriptInterval, Timeout: scriptTimeout, Fall: fall, Rise: rise})
	p.tracks = append(p.tracks, keepalived.TrackFile{Name: track, Path: p.root + onnode.IngressStatusFile(in.Name), Weight: 0,
		Why: "0 while a ready router pod of IngressController " + in.Name + " runs on this node (written by the sidecar)"})
	return p.add(instanceSpec{key: v1alpha1.IngressKey(in.Name), vips: p.model.Ingress[i].VIPs, eligible: routerCandidates(in, p.state), on: in.VIPInterface(), owner: "ingress " + in.Name,
		scripts: []string{script}, files: []string{track}, why: routerWhy(i, in), routed: in.Routed})
}

// addPool adds the VRRP instances of a pool announced through keepalived
// or the sidecar: every instance from the start, advertising only its
// constant anchor; the Services' addresses come and go as excluded
// addresses without changing the adverts.
func (p *Plan) addPool(pool *cluster.Pool) error {
	byInstance := make([][]netip.Addr, pool.Instances)
	for _, a := range p.state.ServiceVIPs[pool.Name] {
		if pool.IsAnchor(a) {
			continue // never allocated; already advertised
		}
		k := pool.Instance(a)
		byInstance[k] = append(byInstance[k], a)
	}
	sel := pool.NodeSelector
	first := len(p.instances)
	for k, vips := range byInstance {
		var anchors []netip.Addr
		for _, v4 := range []bool{true, false} {
			if a, ok := pool.InstanceAnchor(k, v4); ok {
				anchors = append(anchors, a)
			}
		}
		from := len(p.instances)
		if err := p.add(instanceSpec{key: v1alpha1.PoolKey(pool.Name, k), vips: anchors, eligible: func(n *cluster.Node) bool { return cluster.Matches(sel, n.Labels) },
			maxMembers: pool.MaxHolders, on: pool.VIPInterface(), owner: "service pool " + pool.Name,
			why: fmt.Sprintf("service pool %s, instance %d of %d", pool.Name, k+1, pool.Instances)}); err != nil {
			return err
		}
		for _, inst := range p.instances[from:] {
			inst.sidecar = pool.SidecarAnnounced()
			for _, r := range pool.Ranges {
				if inst.sidecar && r.Is4() == (inst.family == 4) {
					inst.ranges = append(inst.ranges, r)
				}
			}
			for _, a := range vips {
				if a.Is4() == (inst.family == 4) {
					inst.excluded = append(inst.excluded, a)
				}
			}
			sort.Slice(inst.excluded, func(i, j int) bool { return inst.excluded[i].Less(inst.excluded[j]) })
		}
	}
	excludeFromServices(p.instances[first:])
	steer(p.instances[first:])
	p.checkPoolHolders(pool)
	return nil
}
