package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestIngressMembersFromNodeSelector: an IngressController's instance
// takes the nodes its routers may run on (spec.ingress[].nodeSelector),
// in `vipctl render` and in the sidecar before it sees the routers, and
// where the routers run once they are on two nodes or more. Without the
// selector every node was a member: at 5000 nodes each keepalived.conf
// listed 4999 unicast peers (issue 47).
func TestIngressMembersFromNodeSelector(t *testing.T) {
	t.Parallel()
	infra := map[string]string{"node-role.kubernetes.io/infra": ""}
	// m-0..m-2 control plane, w-3..w-7 workers, i-8..i-10 infra.
	var nodes []cluster.Node
	for i := 0; i < 11; i++ {
		n := cluster.Node{Name: fmt.Sprintf("w-%d", i), Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 20+i))}, Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}
		switch {
		case i < 3:
			n.Name, n.ControlPlane, n.Labels = fmt.Sprintf("m-%d", i), true, map[string]string{"node-role.kubernetes.io/master": ""}
		case i >= 8:
			n.Name, n.Labels = fmt.Sprintf("i-%d", i), infra
		}
		nodes = append(nodes, n)
	}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		routers  []string
		want     []string
		// unplaced is the start of Plan.Unplaced's message; "" for none.
		unplaced string
	}{
		{name: "no selector: every node", want: []string{"i-10", "i-8", "i-9", "m-0", "m-1", "m-2", "w-3", "w-4", "w-5", "w-6", "w-7"}},
		{name: "infra nodes", selector: infra, want: []string{"i-10", "i-8", "i-9"}},
		{name: "worker nodes", selector: map[string]string{"node-role.kubernetes.io/worker": ""}, want: []string{"w-3", "w-4", "w-5", "w-6", "w-7"}},
		{name: "two labels, both needed", selector: map[string]string{"node-role.kubernetes.io/infra": "", "zone": "a"}, want: nil,
			unplaced: "VRRP instance ingress (IPv4): no node is eligible (held by a node running a ready router of IngressController default on a node matching spec.ingress[0].nodeSelector {node-role.kubernetes.io/infra: \"\", zone: \"a\"}, with an address in 198.51.100.0/24)"},
		{name: "routers seen on two nodes narrow it", selector: infra, routers: []string{"i-8", "i-9"}, want: []string{"i-8", "i-9"}},
		// The routers are where traffic can be served: a selector that
		// disagrees with them is out of date, the pods are not.
		{name: "routers outside the selector win", selector: infra, routers: []string{"w-3", "w-4"}, want: []string{"w-3", "w-4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &v1alpha1.ClusterVIPs{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Metadata: v1alpha1.ObjectMeta{Name: "placed"}}
			c.Spec.BaseDomain = "example.test"
			c.Spec.MachineNetworks = []string{"198.51.100.0/24"}
			c.Spec.API.VIPs = []string{"198.51.100.5"}
			c.Spec.Ingress = []v1alpha1.IngressSpec{{Name: "default", VIPs: []string{"198.51.100.6"}, NodeSelector: tc.selector}}
			v1alpha1.SetDefaults(c)
			if errs := v1alpha1.Validate(c); len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			st := cluster.State{Nodes: nodes, RouterNodes: map[string][]string{}}
			if tc.routers != nil {
				st.RouterNodes["default"] = tc.routers
			}
			p, err := NewPlan(cluster.Compile(c), testIDs(c), st)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, inst := range p.instances {
				if inst.key == v1alpha1.IngressKey("default") {
					for _, m := range inst.eligible {
						got = append(got, m.node.Name)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("members %v, want %v", got, tc.want)
			}
			unplaced := strings.Join(p.Unplaced(), "; ")
			if unplaced != tc.unplaced {
				t.Errorf("Unplaced() = %q, want %q", unplaced, tc.unplaced)
			}
			// A node outside the instance renders none of it.
			for _, n := range nodes {
				if slices.Contains(tc.want, n.Name) || len(tc.want) == 0 {
					continue
				}
				files, err := p.NodeFiles(n.Name)
				if err != nil {
					t.Fatal(err)
				}
				if anyHasPrefix(instancesIn(t, files), "ingress_default_") {
					t.Errorf("%s renders ingress/default, not a member", n.Name)
				}
			}
		})
	}
}
