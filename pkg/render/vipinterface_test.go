package render

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestOwnInterfaceLeavesOutNodesWithout: a node known to lack a pool's
// own interface, or without the label naming an IngressController's,
// takes part in none of their instances (in no node's keepalived.conf,
// as member or peer) and is reported; its other VIPs are unaffected. A
// node whose interfaces are unknown is taken to have it.
func TestOwnInterfaceLeavesOutNodesWithout(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "own-interface.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "dmz.yaml"), "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Interfaces = nil                                  // master-0: unknown
	nodes[1].Interfaces = []string{"br-ex", "eno9"}            // master-1: no br-dmz,
	nodes[1].Labels[c.Spec.Ingress[1].InterfaceLabel] = "eno9" // so partners on eno9
	delete(nodes[2].Labels, c.Spec.Ingress[1].InterfaceLabel)  // master-2: no label
	p, err := NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	want := []onnode.MissingInterface{
		{Node: "master-1", Owner: "service pool dmz", Why: "it has no interface br-dmz"},
		{Node: "master-2", Owner: "ingress partners", Why: "no label vipctl.io/partners-interface"},
	}
	got := p.MissingInterfaces()
	slices.SortFunc(got, func(a, b onnode.MissingInterface) int { return strings.Compare(a.Node, b.Node) })
	if !slices.Equal(got, want) {
		t.Errorf("MissingInterfaces = %v\nwant %v", got, want)
	}
	members := func(key v1alpha1.InstanceKey) []string {
		var out []string
		for _, inst := range p.instances {
			if inst.key != key {
				continue
			}
			for _, m := range inst.eligible {
				if !slices.Contains(out, m.node.Name) {
					out = append(out, m.node.Name)
				}
			}
		}
		return out
	}
	for key, wantMembers := range map[v1alpha1.InstanceKey][]string{
		v1alpha1.PoolKey("dmz", 0):      {"master-0", "master-2"},
		v1alpha1.IngressKey("partners"): {"master-0", "master-1"},
		v1alpha1.KeyAPI:                 {"master-0", "master-1", "master-2"},
		v1alpha1.IngressKey("default"):  {"master-0", "master-1", "master-2"},
	} {
		if got := members(key); !slices.Equal(got, wantMembers) {
			t.Errorf("%s members %v, want %v", key, got, wantMembers)
		}
	}
	conf := confOf(t, p, "master-1")
	if strings.Contains(conf, "pool_dmz") || !strings.Contains(conf, "ingress_partners_v4") {
		t.Errorf("master-1's keepalived.conf: pool dmz there or ingress partners missing:\n%s", conf)
	}
	if strings.Contains(confOf(t, p, "master-0"), "198.51.100.13 min_ttl 255\n    }\n    virtual_ipaddress {\n        203.0.113.100") {
		t.Errorf("master-0 lists master-2 as a peer of ingress partners")
	}
}

// TestOwnInterfaceInstances: an own interface carries the VIPs and is
// tracked, the adverts stay on the VRRP interface from the machine-network
// address, a label names the interface per node, and no handover is
// planned for those instances.
func TestOwnInterfaceInstances(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "own-interface.yaml")
	for i := range r.nodes {
		r.nodes[i].Labels["vipctl.io/partners-interface"] = "eno" + r.nodes[i].Name[len(r.nodes[i].Name)-1:]
	}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), cluster.State{Nodes: r.nodes})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := p.keepalivedView("master-1")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, iv := range kv.Instances {
		want := ""
		switch {
		case strings.HasPrefix(iv.Name, "pool_dmz"):
			want = "br-dmz"
		case strings.HasPrefix(iv.Name, "ingress_partners"):
			want = "eno1"
		}
		if iv.VIPInterface != want || iv.Interface != "br-ex" {
			t.Errorf("%s: VIPs on %q, adverts on %q; want %q and br-ex", iv.Name, iv.VIPInterface, iv.Interface, want)
		}
		if want == "" {
			continue
		}
		found++
		for _, v := range append(slices.Clone(iv.VIPs), iv.Excluded...) {
			if !strings.Contains(v, " dev "+want) {
				t.Errorf("%s: %q not on %s", iv.Name, v, want)
			}
		}
		if !strings.HasPrefix(iv.UnicastSrc, "198.51.100.") && !strings.HasPrefix(iv.UnicastSrc, "2001:db8:100::") {
			t.Errorf("%s: adverts from %s, not the machine network", iv.Name, iv.UnicastSrc)
		}
	}
	if found < 3 { // partners v4, dmz instances v4 and v6
		t.Errorf("only %d own-interface instances on master-1", found)
	}
	h, err := p.Handover("master-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, hi := range h.Instances {
		for _, v := range hi.VIPs {
			if v.Is4() && strings.HasPrefix(v.String(), "203.0.113.") || strings.HasPrefix(v.String(), "2001:db8:200:") {
				t.Errorf("handover instance %d holds %s, a VIP of an own interface", hi.VRID, v)
			}
		}
	}
}
