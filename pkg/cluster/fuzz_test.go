package cluster_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// observedJSON is what the fuzzer varies: the objects the sidecar's
// informers hold, as the API would send them.
type observedJSON struct {
	Nodes    []*corev1.Node               `json:"nodes"`
	Services []*corev1.Service            `json:"services"`
	Slices   []*discoveryv1.EndpointSlice `json:"slices"`
}

const seedObserved = `{"nodes":[
 {"metadata":{"name":"master-0","labels":{"node-role.kubernetes.io/master":""},"annotations":{"vipctl.io/interface":"bond0"}},"status":{"addresses":[{"type":"InternalIP","address":"198.51.100.11"}]}},
 {"metadata":{"name":"master-1","labels":{"node-role.kubernetes.io/control-plane":""}},"status":{"addresses":[{"type":"InternalIP","address":"198.51.100.12"},{"type":"ExternalIP","address":"2001:db8:100::12"}]}},
 {"metadata":{"name":"bad","annotations":{"vipctl.io/interface":"eth0\n}"}},"status":{"addresses":[{"type":"InternalIP","address":"198.51.100.13"}]}}],
"services":[
 {"metadata":{"name":"web","namespace":"shop","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local"},"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.130"}]}}},
 {"metadata":{"name":"db","namespace":"shop"},"spec":{"type":"LoadBalancer"},"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.131"},{"ip":"not-an-ip"}]}}}],
"slices":[
 {"metadata":{"name":"web-1","namespace":"shop","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"nodeName":"master-0","conditions":{"ready":true}}]},
 {"metadata":{"name":"kubernetes","namespace":"default","labels":{"kubernetes.io/service-name":"kubernetes"}},"addressType":"IPv4","endpoints":[{"addresses":["198.51.100.11"]}]}]}`

// FuzzObserve: whatever the API sends (any labels, annotations, addresses,
// Services and EndpointSlices), reading it never panics, every node kept
// has an address and an interface name keepalived.conf can carry, and
// every node renders its files.
func FuzzObserve(f *testing.F) {
	f.Add([]byte(seedObserved))
	f.Add([]byte(`{"nodes":[{"metadata":{"name":"n"},"status":{"addresses":[{"type":"InternalIP","address":"::ffff:198.51.100.11"}]}}]}`))
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "compact-ipv4.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	m := cluster.Compile(c)
	f.Fuzz(func(t *testing.T, data []byte) {
		var o observedJSON
		if json.Unmarshal(data, &o) != nil {
			return
		}
		names := map[string]bool{}
		for _, n := range o.Nodes {
			if n == nil || names[n.Name] {
				return // the API never sends two Nodes of one name
			}
			names[n.Name] = true
		}
		for _, s := range o.Services {
			if s == nil {
				return
			}
		}
		for _, s := range o.Slices {
			if s == nil {
				return
			}
		}
		st := m.Observe(cluster.Observed{Nodes: o.Nodes, Services: o.Services, Slices: o.Slices}).State
		for _, n := range st.Nodes {
			if len(n.Addresses) == 0 {
				t.Fatalf("node %s kept without an address", n.Name)
			}
			if msg := v1alpha1.InterfaceNameError(n.Interface); msg != "" {
				t.Fatalf("node %s kept with interface %q: %s", n.Name, n.Interface, msg)
			}
		}
		var extra []v1alpha1.InstanceKey
		for _, ls := range st.LocalServices {
			extra = append(extra, v1alpha1.ServiceKey(ls.Name))
		}
		ids, _, err := vrid.ForClusterAnd(c, extra)
		if err != nil {
			t.Fatalf("IDs: %v", err)
		}
		for _, ls := range st.LocalServices {
			if _, ok := ids[v1alpha1.ServiceKey(ls.Name)]; !ok {
				return // left out, as the sidecar does (runtimecfg.DesiredNode)
			}
		}
		p, err := render.NewPlan(cluster.Compile(c), ids, st, render.WithLonelySkipped())
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		for _, n := range st.Nodes {
			if _, err := p.NodeFiles(n.Name); err != nil {
				t.Fatalf("node %s renders nothing: %v", n.Name, err)
			}
		}
	})
}
