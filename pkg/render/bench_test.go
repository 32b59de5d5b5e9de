package render

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// benchCluster is the scale target: nodes nodes (2000 in the
// target; 3 control plane), 10 IngressControllers and 20 pools holding
// 1000 VIPs between them. Nodes need more than a /24, so the cluster is
// IPv6 (2001:db8::/32 is documentation space; nothing here touches a
// network). Each controller's routers may run on three infra nodes of
// their own (its nodeSelector, as its nodePlacement would say); the state
// knows no routers, as in `vipctl render` (routersKnown adds them where
// the sidecar would see them).
func benchCluster(b *testing.B, nodes int, routersKnown bool) (*v1alpha1.ClusterVIPs, map[v1alpha1.InstanceKey]uint8, cluster.State) {
	b.Helper()
	c := &v1alpha1.ClusterVIPs{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Metadata: v1alpha1.ObjectMeta{Name: "scale"}}
	c.Spec.BaseDomain = "example.test"
	c.Spec.MachineNetworks = []string{"2001:db8:1::/64"}
	c.Spec.API.VIPs = []string{"2001:db8:1::5"}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("shard-%d", i)
		if i == 0 {
			name = "default"
		}
		c.Spec.Ingress = append(c.Spec.Ingress, v1alpha1.IngressSpec{Name: name, Domain: name + ".example.test", VIPs: []string{fmt.Sprintf("2001:db8:1::1:%x", i)},
			NodeSelector: map[string]string{"node-role.kubernetes.io/infra": "", routerLabel: name}})
	}
	st := cluster.State{ServiceVIPs: map[string][]netip.Addr{}}
	for p := 0; p < 20; p++ {
		name := fmt.Sprintf("pool-%d", p)
		cidr := fmt.Sprintf("2001:db8:1::%x:0/112", 0x100+p)
		c.Spec.ServicePools = append(c.Spec.ServicePools, v1alpha1.ServicePool{Name: name, Addresses: []string{cidr}, Instances: 4})
		first := netip.MustParsePrefix(cidr).Addr()
		for i, a := 0, first.Next(); i < 50; i, a = i+1, a.Next() {
			st.ServiceVIPs[name] = append(st.ServiceVIPs[name], a)
		}
	}
	v1alpha1.SetDefaults(c)
	if errs := v1alpha1.Validate(c); len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	for i := 0; i < nodes; i++ {
		n := cluster.Node{Name: fmt.Sprintf("node-%04d", i), Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("2001:db8:1::a:%x", i))},
			Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}
		if i < 3 {
			n.ControlPlane, n.Labels = true, map[string]string{"node-role.kubernetes.io/master": ""}
		}
		st.Nodes = append(st.Nodes, n)
	}
	// Three infra nodes per controller, its routers on them.
	st.RouterNodes = map[string][]string{}
	for i, in := range c.Spec.Ingress {
		for r := 0; r < 3; r++ {
			n := &st.Nodes[3+3*i+r]
			n.Labels = map[string]string{"node-role.kubernetes.io/infra": "", routerLabel: in.Name}
			if routersKnown {
				st.RouterNodes[in.Name] = append(st.RouterNodes[in.Name], n.Name)
			}
		}
	}
	ids := map[v1alpha1.InstanceKey]uint8{}
	for i, k := range c.InstanceKeys() {
		ids[k] = uint8(1 + i)
	}
	return c, ids, st
}

// routerLabel places one controller's routers in benchCluster.
const routerLabel = "example.test/router"

// BenchmarkRenderNode is the sidecar's job on one node of that cluster:
// plan the whole cluster, then render this node's files (a control-plane
// node: keepalived.conf and haproxy.cfg).
func BenchmarkRenderNode(b *testing.B) {
	c, ids, st := benchCluster(b, 2000, true)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		p, err := NewPlan(cluster.Compile(c), ids, st)
		if err != nil {
			b.Fatal(err)
		}
		files, err := p.NodeFiles("node-0001")
		if err != nil {
			b.Fatal(err)
		}
		size = 0
		for _, f := range files {
			size += len(f.Data)
		}
	}
	b.ReportMetric(float64(size)/1024, "KiB-output")
}

// BenchmarkRenderAllNodes is `vipctl render --nodes` for all 2000 nodes,
// and for 5000 (issue 47: 24 s, 1.67 GB and 880 MB written while every
// node was a member of every ingress instance).
func BenchmarkRenderAllNodes(b *testing.B) {
	for _, nodes := range []int{2000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			c, ids, st := benchCluster(b, nodes, false)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				p, err := NewPlan(cluster.Compile(c), ids, st)
				if err != nil {
					b.Fatal(err)
				}
				size = 0
				for _, n := range st.Nodes {
					files, err := p.NodeFiles(n.Name)
					if err != nil {
						b.Fatal(err)
					}
					for _, f := range files {
						size += len(f.Data)
					}
				}
			}
			b.ReportMetric(float64(size)/(1<<20), "MiB-output")
		})
	}
}
