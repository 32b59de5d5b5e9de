package render

import (
	"net/netip"
	"slices"
	"testing"

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
		p, err := NewPlan(r.config, testIDs(r.config), cluster.State{Nodes: r.nodes, ServiceVIPs: v})
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
