package bundle_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/test/fixture"
)

// BenchmarkRenderDir is `vipctl render --nodes` after the node list is
// read: everything it writes built (bundle.Build) and written
// (bundle.WriteDir), for the OpenShift cluster of the fixture at 2000 and
// 5000 nodes, with the default IngressController's routers on three infra
// nodes (its nodeSelector, copied from its nodePlacement). Issue 47 found
// the 5000-node render at 24 s, 1.67 GB and 880 MB written while every
// node was a member of the ingress instance.
func BenchmarkRenderDir(b *testing.B) {
	c, err := v1alpha1.Parse([]byte(fixture.OpenShiftCluster))
	if err != nil {
		b.Fatal(err)
	}
	c.Spec.Ingress[0].NodeSelector = map[string]string{"node-role.kubernetes.io/infra": ""}
	for _, n := range []int{2000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := make([]cluster.Node, n)
			net := netip.MustParsePrefix(fixture.OpenShiftNetwork).Addr().As16()
			for i := range nodes {
				a := net
				a[13], a[14], a[15] = 0x0a, byte(i>>8), byte(i)
				nodes[i] = cluster.Node{Name: fmt.Sprintf("worker-%04d", i), Addresses: []netip.Addr{netip.AddrFrom16(a)},
					Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}
				switch {
				case i < 3:
					nodes[i].Name, nodes[i].ControlPlane = fmt.Sprintf("master-%d", i), true
					nodes[i].Labels = map[string]string{"node-role.kubernetes.io/master": ""}
				case i < 6:
					nodes[i].Labels["node-role.kubernetes.io/infra"] = ""
				}
			}
			out := filepath.Join(b.TempDir(), "out")
			b.ReportAllocs()
			var written int
			for b.Loop() {
				files, err := bundle.Build(c, bundle.Options{Nodes: nodes})
				if err != nil {
					b.Fatal(err)
				}
				if err := bundle.WriteDir(out, files); err != nil {
					b.Fatal(err)
				}
				written = 0
				for _, f := range files {
					written += len(f.Data)
				}
			}
			b.ReportMetric(float64(written)/(1<<20), "MiB-written")
		})
	}
}
