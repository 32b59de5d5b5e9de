package render

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// benchCluster is the scale target: 2000 nodes (3 control plane),
// 10 IngressControllers and 20 pools holding 1000 VIPs between them. Nodes
// need more than a /24, so the cluster is IPv6 (2001:db8::/32 is
// documentation space; nothing here touches a network).
func benchCluster(b *testing.B) (*v1alpha1.ClusterVIPs, map[v1alpha1.InstanceKey]uint8, cluster.State) {
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
		c.Spec.Ingress = append(c.Spec.Ingress, v1alpha1.IngressSpec{Name: name, Domain: name + ".example.test", VIPs: []string{fmt.Sprintf("2001:db8:1::1:%x", i)}})
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
	for i := 0; i < 2000; i++ {
		n := cluster.Node{Name: fmt.Sprintf("node-%04d", i), Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("2001:db8:1::a:%x", i))}}
		if i < 3 {
			n.ControlPlane = true
		}
		st.Nodes = append(st.Nodes, n)
	}
	// Routers run on three workers per controller, as the sidecar would
	// learn from the API.
	st.RouterNodes = map[string][]string{}
	for i, in := range c.Spec.Ingress {
		for r := 0; r < 3; r++ {
			st.RouterNodes[in.Name] = append(st.RouterNodes[in.Name], fmt.Sprintf("node-%04d", 3+(3*i+r)%1997))
		}
	}
	ids := map[v1alpha1.InstanceKey]uint8{}
	for i, k := range c.InstanceKeys() {
		ids[k] = uint8(1 + i)
	}
	return c, ids, st
}

// BenchmarkRenderNode is the sidecar's job on one node of that cluster:
// plan the whole cluster, then render this node's files (a control-plane
// node: keepalived.conf and haproxy.cfg).
func BenchmarkRenderNode(b *testing.B) {
	c, ids, st := benchCluster(b)
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

// BenchmarkRenderAllNodes is `vipctl render --nodes` for all 2000 nodes.
func BenchmarkRenderAllNodes(b *testing.B) {
	c, ids, st := benchCluster(b)
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
}
