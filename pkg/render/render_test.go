package render

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/golden"
)

// exampleNodes names the node list each example is rendered with. Every
// file in examples/ must appear here: TestEveryExampleHasNodes fails
// otherwise, so a new example cannot go unrendered.
var exampleNodes = map[string]string{
	"compact-ipv4.yaml":      "compact.yaml",
	"day1-bootstrap.yaml":    "compact.yaml",
	"day1-agent.yaml":        "compact.yaml",
	"dual-stack.yaml":        "compact.yaml",
	"api-int.yaml":           "compact.yaml",
	"ingress-shards.yaml":    "compact.yaml",
	"multicast-fast.yaml":    "compact.yaml",
	"pools-node-groups.yaml": "groups.yaml",
	"pools-only.yaml":        "compact.yaml",
	"bgp-two-racks.yaml":     "racks.yaml",
	"bgp-unnumbered.yaml":    "racks.yaml",
	"own-interface.yaml":     "dmz.yaml",
}

// testIDs stands in for vrid.ForCluster (which lives above this package):
// distinct IDs in key order are all the renderer needs.
func testIDs(c *v1alpha1.ClusterVIPs) map[v1alpha1.InstanceKey]uint8 {
	ids := map[v1alpha1.InstanceKey]uint8{}
	for i, k := range c.InstanceKeys() {
		ids[k] = uint8(10 + i)
	}
	return ids
}

// samplePoolVIPs allocates the first three addresses of every pool block,
// as the IPAM would for the first Services.
func samplePoolVIPs(t *testing.T, c *v1alpha1.ClusterVIPs) map[string][]netip.Addr {
	t.Helper()
	out := map[string][]netip.Addr{}
	for _, p := range c.Spec.ServicePools {
		for _, a := range p.Addresses {
			r, err := v1alpha1.ParseAddressRange(a)
			if err != nil {
				t.Fatal(err)
			}
			for i, addr := 0, r.First; i < 3 && r.Contains(addr); i, addr = i+1, addr.Next() {
				out[p.Name] = append(out[p.Name], addr)
			}
		}
	}
	return out
}

type renderedExample struct {
	config *v1alpha1.ClusterVIPs
	nodes  []cluster.Node
	plan   *Plan
	files  map[string][]onnode.File // by node
}

func renderExample(t *testing.T, example string) *renderedExample {
	t.Helper()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", exampleNodes[example]), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes, ServiceVIPs: samplePoolVIPs(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	r := &renderedExample{config: c, nodes: nodes, plan: p, files: map[string][]onnode.File{}}
	if c.Spec.Bootstrap != nil {
		// What `vipctl bootstrap` runs is pinned with the nodes' files.
		nodes = append(slices.Clone(nodes), cluster.Node{Name: BootstrapNode})
	}
	for _, n := range nodes {
		files, err := p.NodeFiles(n.Name)
		if err != nil {
			t.Fatalf("%s: node %s: %v", example, n.Name, err)
		}
		r.files[n.Name] = files
	}
	return r
}

func TestEveryExampleHasNodes(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		if _, ok := exampleNodes[e]; !ok {
			t.Errorf("examples/%s has no node list in exampleNodes: it would not be rendered by any test", e)
		}
	}
}

// TestRenderGolden pins every node's files for every example.
func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, e := range fixture.Examples(t) {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			r := renderExample(t, e)
			var b bytes.Buffer
			names := make([]string, 0, len(r.files))
			for _, n := range r.nodes {
				names = append(names, n.Name)
			}
			if r.config.Spec.Bootstrap != nil {
				names = append(names, BootstrapNode)
			}
			for _, name := range names {
				for _, f := range r.files[name] {
					if strings.HasPrefix(f.Path, onnode.ScriptsDir) {
						continue // identical everywhere; pinned once below
					}
					fmt.Fprintf(&b, "### node %s: %s (%04o)\n%s\n", name, f.Path, f.Mode.Perm(), f.Data)
				}
			}
			golden.Assert(t, strings.TrimSuffix(e, ".yaml"), b.Bytes())
		})
	}
}

func TestScriptsGolden(t *testing.T) {
	t.Parallel()
	files := ScriptFiles()
	for _, f := range files {
		if f.Mode.Perm() != 0o755 {
			t.Errorf("%s: mode %04o, want 0755", f.Path, f.Mode.Perm())
		}
		golden.Assert(t, filepath.Base(f.Path), f.Data)
	}
}

// instancesIn lists "key family" pairs of a keepalived.conf.
func instancesIn(t *testing.T, files []onnode.File) []string {
	t.Helper()
	for _, f := range files {
		if f.Path != onnode.KeepalivedConfPath {
			continue
		}
		var out []string
		for _, line := range strings.Split(string(f.Data), "\n") {
			if name, ok := strings.CutPrefix(line, "vrrp_instance "); ok {
				out = append(out, strings.TrimSuffix(name, " {"))
			}
		}
		sort.Strings(out)
		return out
	}
	t.Fatal("no keepalived.conf rendered")
	return nil
}

func TestPoolsOnlyOnTheirNodes(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "pools-node-groups.yaml")
	// Per node: the instance-name prefixes allowed, and those that must be
	// there (the sample allocation puts addresses in at least one instance
	// of each pool).
	cases := map[string]struct{ allowed, required []string }{
		"master-0":  {[]string{"api_v4", "ingress_v4"}, []string{"api_v4", "ingress_v4"}},
		"worker-a0": {[]string{"ingress_v4", "pool_rack_a_"}, []string{"ingress_v4", "pool_rack_a_"}},
		"edge-0":    {[]string{"pool_edge_"}, []string{"pool_edge_"}},
	}
	for node, tc := range cases {
		got := instancesIn(t, r.files[node])
		for _, inst := range got {
			if !hasAnyPrefix(inst, tc.allowed) {
				t.Errorf("%s runs %s; only %v belong there", node, inst, tc.allowed)
			}
		}
		for _, req := range tc.required {
			if !anyHasPrefix(got, req) {
				t.Errorf("%s lacks an instance %s*; has %v", node, req, got)
			}
		}
	}
	for _, n := range []string{"edge-0", "edge-1"} {
		for _, f := range r.files[n] {
			if f.Path == onnode.HaproxyConfPath {
				t.Errorf("%s is not control plane but got haproxy.cfg", n)
			}
			if f.Path == onnode.KeepalivedConfPath && bytes.Contains(f.Data, []byte("198.51.100.")) {
				t.Errorf("%s (second segment) got a first-segment address:\n%s", n, f.Data)
			}
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func anyHasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestDualStackInstancesPerFamily(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	conf := string(r.files["master-1"][0].Data)
	for _, want := range []string{
		"vrrp_instance api_v4 {", "vrrp_instance api_v6 {",
		"unicast_src_ip 2001:db8:100::12", "2001:db8:100::5/128 dev br-ex",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("dual-stack keepalived.conf lacks %q", want)
		}
	}
	// IPv6 always speaks VRRPv3, whatever the IPv4 instances use.
	_, v6, _ := strings.Cut(conf, "vrrp_instance api_v6 {")
	v6, _, _ = strings.Cut(v6, "\n}")
	if !strings.Contains(v6, "version 3") {
		t.Errorf("api_v6 is not VRRPv3:\n%s", v6)
	}
}

func TestMulticastHasNoUnicastPeers(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "multicast-fast.yaml")
	conf := string(r.files["master-0"][0].Data)
	if strings.Contains(conf, "unicast_peer") || strings.Contains(conf, "unicast_src_ip") {
		t.Errorf("multicast config has unicast settings:\n%s", conf)
	}
	if !strings.Contains(conf, "advert_int 0.1") || !strings.Contains(conf, "version 3") {
		t.Errorf("fast profile not applied:\n%s", conf)
	}
}

func TestRefusesInstanceWithoutPeers(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "compact-ipv4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "compact.yaml"), "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes[:1]})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.NodeFiles(nodes[0].Name)
	want := "node master-0: VRRP instance api (IPv4) has no unicast peer: it needs at least two eligible nodes with an address in 198.51.100.0/24"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}

	// The sidecar's plan leaves the lonely instances out instead, and
	// says so; the node's other files still render.
	p, err = NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes[:1]}, WithLonelySkipped())
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Node(nodes[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := instancesIn(t, r.Files); len(got) != 0 {
		t.Errorf("lonely instances rendered: %v", got)
	}
	if len(r.Lonely) == 0 || r.Lonely[0] != want {
		t.Errorf("Lonely = %q, want %q first", r.Lonely, want)
	}
	// Rendering again from the same plan gives the same answer: a render
	// does not change the plan.
	if again, _ := p.Node(nodes[0].Name); len(again.Lonely) != len(r.Lonely) {
		t.Errorf("second render: %d lonely, first %d", len(again.Lonely), len(r.Lonely))
	}
}

// TestPrioritiesStableWhenNodesChange: adding a node must not change any
// other node's hashed priority, or every membership change would move VIPs.
// (Pool instances are steered on top of the hash; see TestPoolSteering.)
func TestPrioritiesStableWhenNodesChange(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "compact-ipv4.yaml")
	before := map[string]int{}
	for _, inst := range r.plan.instances {
		for _, m := range inst.eligible {
			before[inst.key.String()+"/"+m.node.Name] = m.priority
		}
	}
	extra := cluster.Node{Name: "master-3", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.14")}}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), cluster.State{Nodes: append(append([]cluster.Node{}, r.nodes...), extra), ServiceVIPs: r.plan.state.ServiceVIPs})
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range p.instances {
		if strings.HasPrefix(inst.key.String(), "pool/") {
			continue
		}
		for _, m := range inst.eligible {
			if old, ok := before[inst.key.String()+"/"+m.node.Name]; ok && old != m.priority {
				t.Errorf("%s on %s: priority %d became %d after adding a node", inst.key, m.node.Name, old, m.priority)
			}
		}
	}
}

// TestPoolSteering: the instances of a pool prefer different nodes (as
// many as there are nodes), for any pool name, so a pool is served
// active-active rather than by whichever node the hash favours.
func TestPoolSteering(t *testing.T) {
	t.Parallel()
	nodes := []cluster.Node{
		{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.21")}},
		{Name: "worker-1", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.22")}},
		{Name: "worker-2", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.23")}},
	}
	for _, tc := range []struct{ nodes, instances, wantHolders int }{{2, 2, 2}, {3, 2, 2}, {2, 3, 2}, {3, 3, 3}} {
		for i := 0; i < 20; i++ {
			var insts []*instance
			for k := 0; k < tc.instances; k++ {
				inst := &instance{key: v1alpha1.PoolKey(fmt.Sprintf("p%d", i), k), family: 4}
				for n := range nodes[:tc.nodes] {
					inst.eligible = append(inst.eligible, member{node: &nodes[n], priority: priority(inst.key, nodes[n].Name)})
				}
				insts = append(insts, inst)
			}
			steer(insts)
			holders := map[string]bool{}
			for _, inst := range insts {
				best := inst.eligible[0]
				for _, m := range inst.eligible[1:] {
					if m.priority > best.priority {
						best = m
					}
				}
				if best.priority != preferredPriority {
					t.Fatalf("%s: top priority %d, want the steered %d", inst.key, best.priority, preferredPriority)
				}
				holders[best.node.Name] = true
			}
			if len(holders) != tc.wantHolders {
				t.Errorf("pool p%d, %d nodes, %d instances: preferred holders %v, want %d distinct", i, tc.nodes, tc.instances, holders, tc.wantHolders)
			}
		}
	}
}

// TestIngressFollowsRouterPlacement: once the sidecar knows where a
// controller's routers run, only those nodes take part in its instance, so
// a shard's VIP can never be offered to a node without its router.
func TestIngressFollowsRouterPlacement(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "ingress-shards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "compact.yaml"), "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	st := cluster.State{Nodes: nodes, RouterNodes: map[string][]string{"internal": {"master-1", "master-2"}}}
	p, err := NewPlan(cluster.Compile(c), testIDs(c), st)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]bool{"master-0": false, "master-1": true, "master-2": true} {
		files, err := p.NodeFiles(node)
		if err != nil {
			t.Fatal(err)
		}
		got := anyHasPrefix(instancesIn(t, files), "ingress_internal_")
		if got != want {
			t.Errorf("%s runs ingress/internal: %v, want %v", node, got, want)
		}
		// Controllers whose placement is unknown stay on every node.
		if !anyHasPrefix(instancesIn(t, files), "ingress_partners_") {
			t.Errorf("%s lost ingress/partners, whose placement is unknown", node)
		}
	}
	files, err := p.NodeFiles("master-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := peersOf(t, string(files[0].Data), "ingress_internal_v4"); strings.Join(got, " ") != "198.51.100.13" {
		t.Errorf("master-1's ingress/internal peers = %v, want only master-2 (198.51.100.13)", got)
	}
}

// peersOf returns the unicast_peer addresses of one vrrp_instance block.
func peersOf(t *testing.T, conf, instance string) []string {
	t.Helper()
	start := strings.Index(conf, "vrrp_instance "+instance+" {")
	if start < 0 {
		t.Fatalf("no instance %s", instance)
	}
	_, peers, ok := strings.Cut(conf[start:], "unicast_peer {")
	peers, _, closed := strings.Cut(peers, "}")
	if !ok || !closed {
		t.Fatalf("instance %s has no unicast_peer block", instance)
	}
	var out []string
	for _, line := range strings.Split(peers, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0]) // the address; min_ttl follows it
		}
	}
	return out
}

// TestPoolMaxHolders: a pool instance takes part on at most maxHolders
// nodes, and a node that joins without ranking among them changes nothing.
func TestPoolMaxHolders(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Parse([]byte(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: capped}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
  servicePools:
    - name: big
      addresses: [198.51.100.128/26]
      instances: 1
      maxHolders: 3
`))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []cluster.Node
	for i := 0; i < 12; i++ {
		nodes = append(nodes, cluster.Node{Name: fmt.Sprintf("w-%02d", i), ControlPlane: i < 3, Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 20+i))}})
	}
	vips := map[string][]netip.Addr{"big": {netip.MustParseAddr("198.51.100.130")}}
	members := func(nodes []cluster.Node) []string {
		p, err := NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes, ServiceVIPs: vips})
		if err != nil {
			t.Fatal(err)
		}
		for _, inst := range p.instances {
			if inst.key == "pool/big/0" {
				var names []string
				for _, m := range inst.eligible {
					names = append(names, m.node.Name)
				}
				return names
			}
		}
		t.Fatal("no pool instance")
		return nil
	}
	before := members(nodes)
	if len(before) != 3 {
		t.Fatalf("members %v, want 3", before)
	}
	// Add nodes one by one; whenever the newcomer is not among the members,
	// the members must be unchanged.
	grown := append([]cluster.Node{}, nodes...)
	for i := 12; i < 40; i++ {
		grown = append(grown, cluster.Node{Name: fmt.Sprintf("w-%02d", i), Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 20+i))}})
		after := members(grown)
		if !slices.Contains(after, grown[len(grown)-1].Name) && strings.Join(after, " ") != strings.Join(before, " ") {
			t.Fatalf("adding %s (not a member) changed members %v -> %v", grown[len(grown)-1].Name, before, after)
		}
		before = after
	}
}
