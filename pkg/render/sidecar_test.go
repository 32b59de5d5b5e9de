package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestSidecarAnnouncedPool: with announce: sidecar a Service address
// changes no node's keepalived.conf (so it reloads nothing) and reaches
// the sidecar through the handover data instead, next to the anchor it
// follows. examples/dual-stack.yaml's dual-v6 pool is announced so; its
// dual-v4 pool, by keepalived, still changes keepalived.conf.
func TestSidecarAnnouncedPool(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	vips := samplePoolVIPs(t, r.config)
	more := func(pool string, a netip.Addr) *Plan {
		t.Helper()
		v := map[string][]netip.Addr{}
		for k, l := range vips {
			v[k] = slices.Clone(l)
		}
		v[pool] = append(v[pool], a)
		p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), cluster.State{Nodes: r.nodes, ServiceVIPs: v})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	added := netip.MustParseAddr("2001:db8:100::1:10")
	v6, v4 := more("dual-v6", added), more("dual-v4", netip.MustParseAddr("198.51.100.140"))
	follows := false
	for _, n := range r.nodes {
		if confOf(t, r.plan, n.Name) != confOf(t, v6, n.Name) {
			t.Errorf("node %s: a Service address of the sidecar-announced pool changed keepalived.conf", n.Name)
		}
		if confOf(t, r.plan, n.Name) == confOf(t, v4, n.Name) {
			t.Errorf("node %s: a Service address of the keepalived-announced pool did not change keepalived.conf", n.Name)
		}
		h, err := v6.Handover(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range h.Instances {
			if in.Family == 4 && len(in.Sidecar)+len(in.Anchors) > 0 {
				t.Errorf("node %s: IPv4 instance %d follows anchors %v with %v; its pool is keepalived's", n.Name, in.VRID, in.Anchors, in.Sidecar)
			}
			if !slices.Contains(in.Sidecar, added) {
				continue
			}
			follows = true
			if len(in.Anchors) != 1 || !slices.Contains(in.VIPs, in.Anchors[0]) || !slices.Contains(in.VIPs, added) || slices.Contains(in.Sidecar, in.Anchors[0]) {
				t.Errorf("node %s: instance %d: anchors %v, sidecar %v, VIPs %v: want one anchor, both in VIPs, the anchor not the sidecar's", n.Name, in.VRID, in.Anchors, in.Sidecar, in.VIPs)
			}
		}
	}
	if !follows {
		t.Errorf("no node's handover data has %s for the sidecar to add", added)
	}
}

// TestSysctlFiles: the node settings file comes with a sidecar-announced
// pool that has IPv6 addresses (examples/dual-stack.yaml) and names the
// VRRP interface; a keepalived-announced pool, or a sidecar-announced one
// of IPv4 only, needs none.
func TestSysctlFiles(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	files := SysctlFiles(r.config)
	if len(files) != 1 || files[0].Path != onnode.SysctlPath {
		t.Fatalf("dual-stack: %d files, want %s", len(files), onnode.SysctlPath)
	}
	for _, line := range []string{"net.ipv6.conf.all.proxy_ndp = 1\n", "net/ipv6/conf/br-ex/forwarding = 1\n", "net/ipv6/neigh/br-ex/proxy_delay = 0\n"} {
		if !strings.Contains(string(files[0].Data), line) {
			t.Errorf("dual-stack's %s lacks %q:\n%s", onnode.SysctlPath, line, files[0].Data)
		}
	}
	c := *r.config
	c.Spec.ServicePools = slices.Clone(c.Spec.ServicePools)
	for i := range c.Spec.ServicePools {
		c.Spec.ServicePools[i].Announce = ""
	}
	if got := SysctlFiles(&c); len(got) != 0 {
		t.Errorf("no sidecar pool: %d files, want none", len(got))
	}
	c.Spec.ServicePools = []v1alpha1.ServicePool{{Name: "v4", Announce: v1alpha1.AnnounceSidecar, Addresses: []string{"198.51.100.128/26"}}}
	if got := SysctlFiles(&c); len(got) != 0 {
		t.Errorf("IPv4-only sidecar pool: %d files, want none", len(got))
	}
}

// TestSidecarLeavesLocalServicesToKeepalived: an externalTrafficPolicy
// Local Service of a pool with announce: sidecar gets an instance of its
// own, whose address keepalived adds itself. The sidecar removes any
// address of its pools' ranges that no held anchor calls for, so the
// handover data must name this one as keepalived's, or the sidecar takes
// it off again as soon as keepalived adds it (found in the cluster lab:
// the instance flapped between MASTER and BACKUP and nobody held it).
func TestSidecarLeavesLocalServicesToKeepalived(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	vip := netip.MustParseAddr("2001:db8:100::1:20")
	holder := r.nodes[0].Name
	p := localServicePlan(t, r, cluster.LocalService{Name: "shop/web", Pool: "dual-v6", VIPs: []netip.Addr{vip}, Nodes: []string{holder}})
	h, err := p.Handover(holder)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(h.Keepalived, vip) {
		t.Errorf("%s's handover data: keepalived's addresses %v lack the Local Service's %s", holder, h.Keepalived, vip)
	}
	for _, in := range h.Instances {
		if slices.Contains(in.Sidecar, vip) {
			t.Errorf("instance %d lists the Local Service's %s as the sidecar's to add", in.VRID, vip)
		}
	}
	if !strings.Contains(confOf(t, p, holder), vip.String()) {
		t.Errorf("%s's keepalived.conf lacks the Local Service's %s", holder, vip)
	}
}

// TestFollowersMatchTheRender: what the sidecar adds ahead of a render
// (cluster.Model.Followers, from one Service alone) is what the render
// then carries: every such address is in the Sidecar list of an instance
// whose anchors hold the one Followers names, on every node whose
// handover has it, and on one node at least; and every address a
// handover gives the sidecar is some Service's follower. A Service of the
// keepalived-announced pool, one with externalTrafficPolicy Local and one
// of another class have none.
func TestFollowersMatchTheRender(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	m := cluster.Compile(r.config)
	svc := func(name string, ips ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	var services []*corev1.Service
	for i := range 40 {
		services = append(services, svc(fmt.Sprintf("v6-%d", i), fmt.Sprintf("2001:db8:100::1:%x", 0x10+i)))
	}
	services = append(services, svc("v4", "198.51.100.140"))
	local := svc("local", "2001:db8:100::1:200")
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	other := svc("other", "2001:db8:100::1:201")
	other.Spec.LoadBalancerClass = ptr("example.com/other")
	for _, s := range []*corev1.Service{services[len(services)-1], local, other} {
		if f := m.Followers(s); len(f) > 0 {
			t.Errorf("Service %s: followers %v, want none", s.Name, f)
		}
	}
	byPool, _, _ := m.ServiceAddresses(services)
	p, err := NewPlan(m, testIDs(r.config), cluster.State{Nodes: r.nodes, ServiceVIPs: byPool})
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[netip.Addr][]netip.Addr{} // a Sidecar address → the anchors of its instance, every node
	for _, n := range r.nodes {
		h, err := p.Handover(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range h.Instances {
			for _, a := range in.Sidecar {
				anchorsOf[a] = append(anchorsOf[a], in.Anchors...)
			}
		}
	}
	followers := 0
	for _, s := range services {
		for _, f := range m.Followers(s) {
			followers++
			if len(anchorsOf[f.Addr]) == 0 {
				t.Errorf("Service %s: %s follows %s, but no node's handover gives it to the sidecar", s.Name, f.Addr, f.Anchor)
			}
			for _, a := range anchorsOf[f.Addr] {
				if a != f.Anchor {
					t.Errorf("Service %s: %s follows %s, but a node's handover has it in the instance of %s", s.Name, f.Addr, f.Anchor, a)
				}
			}
		}
	}
	if followers != 40 || len(anchorsOf) != 40 {
		t.Errorf("%d followers, %d addresses in the handovers' Sidecar lists, want 40 each", followers, len(anchorsOf))
	}
}

func ptr[T any](v T) *T { return &v }
