package render

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
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
	if len(files) != 1 || files[0].Path != SysctlPath {
		t.Fatalf("dual-stack: %d files, want %s", len(files), SysctlPath)
	}
	for _, line := range []string{"net.ipv6.conf.all.proxy_ndp = 1\n", "net/ipv6/conf/br-ex/forwarding = 1\n", "net/ipv6/neigh/br-ex/proxy_delay = 0\n"} {
		if !strings.Contains(string(files[0].Data), line) {
			t.Errorf("dual-stack's %s lacks %q:\n%s", SysctlPath, line, files[0].Data)
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
