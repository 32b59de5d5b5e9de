package render

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// fileOf returns the data of the file at path among files ("" if none).
func fileOf(files []onnode.File, path string) string {
	for _, f := range files {
		if f.Path == path {
			return string(f.Data)
		}
	}
	return ""
}

// instanceBlock cuts one vrrp_instance out of a keepalived.conf.
func instanceBlock(t *testing.T, conf, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(conf, "vrrp_instance "+name+" {")
	if !ok {
		t.Fatalf("no instance %s in:\n%s", name, conf)
	}
	block, _, _ := strings.Cut(rest, "\n}\n")
	return block
}

// TestBootstrapHost: with spec.bootstrap, the bootstrap host is a member
// of the API instances only, above every node, and yields to them at
// priority 1 (its drain file); every control-plane node lists it as a
// unicast peer of the API instance and of its handover data, of no other
// instance; its haproxy balances over the bootstrap machine's servers
// first, then the control-plane nodes, on the interface and servers
// `vipctl bootstrap` found.
func TestBootstrapHost(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "day1-bootstrap.yaml")
	boot := netip.MustParseAddr("198.51.100.9")
	st := cluster.State{Nodes: r.nodes, Bootstrap: &cluster.BootstrapHost{Interface: "ens3", Servers: []netip.Addr{netip.MustParseAddr("198.51.100.10")}}}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), st)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.nodes {
		files, err := p.NodeFiles(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		conf := fileOf(files, onnode.KeepalivedConfPath)
		if !strings.Contains(instanceBlock(t, conf, "api_v4"), "198.51.100.9 min_ttl 255") {
			t.Errorf("%s: the API instance does not take the bootstrap host as a peer:\n%s", n.Name, conf)
		}
		if strings.Contains(instanceBlock(t, conf, "ingress_v4"), "198.51.100.9") {
			t.Errorf("%s: the ingress instance names the bootstrap host", n.Name)
		}
		h, err := p.Handover(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, hi := range h.Instances {
			if got, want := slices.Contains(hi.Peers, boot), hi.VIPs[0] == netip.MustParseAddr("198.51.100.5"); got != want {
				t.Errorf("%s: handover instance %v: bootstrap host among the peers %v, want %v", n.Name, hi.VIPs, got, want)
			}
		}
	}

	files, err := p.NodeFiles(BootstrapNode)
	if err != nil {
		t.Fatal(err)
	}
	conf := fileOf(files, onnode.KeepalivedConfPath)
	if got := instancesIn(t, files); !slices.Equal(got, []string{"api_v4"}) {
		t.Errorf("the bootstrap host runs instances %v, want only api_v4", got)
	}
	api := instanceBlock(t, conf, "api_v4")
	for _, want := range []string{"interface ens3", "priority 254", "unicast_src_ip 198.51.100.9", "198.51.100.11 min_ttl 255", "198.51.100.13 min_ttl 255", "198.51.100.5/32 dev ens3", "vipctl_drain weight -253"} {
		if !strings.Contains(api, want) {
			t.Errorf("the bootstrap host's API instance lacks %q:\n%s", want, api)
		}
	}
	hcfg := fileOf(files, onnode.HaproxyConfPath)
	for _, want := range []string{
		"server vipctl_bootstrap 198.51.100.10:6443\n    server master-0 198.51.100.11:6443",
		"server vipctl_bootstrap 198.51.100.10:22623\n    server master-0 198.51.100.11:22623",
	} {
		if !strings.Contains(hcfg, want) {
			t.Errorf("the bootstrap host's haproxy.cfg lacks %q:\n%s", want, hcfg)
		}
	}
	h, err := p.Handover(BootstrapNode)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Instances) != 1 || h.Interface != "ens3" || h.Instances[0].Priority != BootstrapPriority || len(h.Instances[0].Peers) != 3 {
		t.Errorf("the bootstrap host's handover data: %+v", h)
	}
}

// TestBootstrapHostWithoutNodes: with no control-plane node to yield to,
// the bootstrap host's API instance has no peer; the plan refuses to
// render it (the sidecar's lonely-skipping plan leaves it out and says so).
func TestBootstrapHostWithoutNodes(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "day1-bootstrap.yaml")
	var workers []cluster.Node
	for _, n := range r.nodes {
		n.ControlPlane = false
		workers = append(workers, n)
	}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), cluster.State{Nodes: workers})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.NodeFiles(BootstrapNode); err == nil || !strings.Contains(err.Error(), "has no unicast peer") {
		t.Errorf("no control-plane node: %v, want a refusal for lack of a peer", err)
	}
	p, err = NewPlan(cluster.Compile(r.config), testIDs(r.config), cluster.State{Nodes: r.nodes[:1]}, WithLonelySkipped())
	if err != nil {
		t.Fatal(err)
	}
	if nr, err := p.Node(BootstrapNode); err != nil || len(nr.Lonely) != 0 {
		t.Errorf("one control-plane node is a peer enough: %v, lonely %v", err, nr.Lonely)
	}
}

// TestBootstrapHostRunsNoFRR: with bgp pools the nodes run FRR; the
// bootstrap host announces nothing.
func TestBootstrapHostRunsNoFRR(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Addresses: []string{"198.51.100.9"}}
	p, err := NewPlan(cluster.Compile(&c), testIDs(&c), cluster.State{Nodes: r.nodes})
	if err != nil {
		t.Fatal(err)
	}
	nr, err := p.Node(BootstrapNode)
	if err != nil {
		t.Fatal(err)
	}
	if fileOf(nr.Files, onnode.FRRConfPath) != "" || len(nr.Announced) != 0 {
		t.Errorf("the bootstrap host got frr.conf or announcements: %v", nr.Announced)
	}
}

// TestBootstrapHostRoutedAPI: with a routed API VIP the bootstrap host,
// in rack a by its labels, gets a frr.conf that peers with rack a's
// router alone and redistributes the API VIP's connected route (the
// ingress VIP is no business of its), which vtysh accepts; it announces
// no pool; master-2 in rack b lists its address as a unicast peer of the
// API instance, across the router.
func TestBootstrapHostRoutedAPI(t *testing.T) {
	t.Parallel()
	p := routedTwoRacks(t, &v1alpha1.BootstrapSpec{Addresses: []string{"198.51.100.9"}, Labels: map[string]string{"topology.kubernetes.io/zone": "rack-a"}})
	nr, err := p.Node(BootstrapNode)
	if err != nil {
		t.Fatal(err)
	}
	fc := fileOf(nr.Files, onnode.FRRConfPath)
	for _, want := range []string{
		" neighbor 198.51.100.1 remote-as 64512\n",
		"\nip prefix-list vipctl-held4 seq 5 permit 203.0.113.150/32\n",
		"  redistribute connected route-map vipctl-held\n",
	} {
		if !strings.Contains(fc, want) {
			t.Errorf("the bootstrap host's frr.conf lacks %q:\n%s", want, fc)
		}
	}
	for _, not := range []string{"203.0.113.1 ", "203.0.113.151", "203.0.113.224"} {
		if strings.Contains(fc, not) {
			t.Errorf("the bootstrap host's frr.conf names %q (rack b's router, the ingress VIP or a pool):\n%s", not, fc)
		}
	}
	if len(nr.Announced) != 0 {
		t.Errorf("the bootstrap host announces pools: %v", nr.Announced)
	}
	if err := frr.Check(context.Background(), []byte(fc), configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses the bootstrap host's frr.conf: %v\n%s", err, fc)
	}
	files, err := p.NodeFiles("master-2")
	if err != nil {
		t.Fatal(err)
	}
	if ka := fileOf(files, onnode.KeepalivedConfPath); !strings.Contains(ka, "        198.51.100.9\n") {
		t.Errorf("master-2 does not list the bootstrap host as a unicast peer:\n%s", ka)
	}
}

// TestBootstrapHostInPlace: the agent-based installer's rendezvous host
// bootstraps the cluster and reboots into master-0, so spec.bootstrap
// names master-0's addresses (examples/day1-agent.yaml). Every node, the
// bootstrap host's render too, lists each peer address once and never
// its own: master-1 and master-2 take 198.51.100.11 as one peer, whether
// the bootstrap host (priority 254) or master-0 speaks from it, so the
// reboot changes no config; master-0 and the bootstrap host, one host,
// do not list each other. The bootstrap host's haproxy has the address
// once, as the bootstrap machine's.
//
// dual-stack.yaml in place (master-0's addresses of both families as
// spec.bootstrap's) holds to the same in each family's instances.
func TestBootstrapHostInPlace(t *testing.T) {
	t.Parallel()
	dual := renderExample(t, "dual-stack.yaml")
	c := *dual.config
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Addresses: []string{"198.51.100.11", "2001:db8:100::11"}}
	p, err := NewPlan(cluster.Compile(&c), testIDs(&c), cluster.State{Nodes: dual.nodes})
	if err != nil {
		t.Fatal(err)
	}
	dual = &renderedExample{config: &c, nodes: dual.nodes, plan: p, files: map[string][]onnode.File{}}
	for _, n := range append(slices.Clone(dual.nodes), cluster.Node{Name: BootstrapNode}) {
		if dual.files[n.Name], err = p.NodeFiles(n.Name); err != nil {
			t.Fatalf("dual-stack in place: %s: %v", n.Name, err)
		}
	}
	for _, r := range []*renderedExample{renderExample(t, "day1-agent.yaml"), dual} {
		bootstrapInPlace(t, r)
	}
}

// bootstrapInPlace checks r, rendered with spec.bootstrap naming
// master-0's addresses, as TestBootstrapHostInPlace says.
func bootstrapInPlace(t *testing.T, r *renderedExample) {
	t.Helper()
	rendezvous := map[int]string{}
	for _, a := range r.config.Spec.Bootstrap.Addresses {
		if strings.Contains(a, ":") {
			rendezvous[6] = a
		} else {
			rendezvous[4] = a
		}
	}
	checked := 0
	for _, name := range []string{"master-0", "master-1", "master-2", BootstrapNode} {
		files := r.files[name]
		conf := fileOf(files, onnode.KeepalivedConfPath)
		for _, inst := range instancesIn(t, files) {
			block := instanceBlock(t, conf, inst)
			src := fieldAfter(block, "unicast_src_ip")
			peers := unicastPeers(block)
			if slices.Contains(peers, src) {
				t.Errorf("%s %s: its own address %s among its peers %v", name, inst, src, peers)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(peers)))) != len(peers) {
				t.Errorf("%s %s: a peer listed twice: %v", name, inst, peers)
			}
			fam := 4
			if strings.HasSuffix(inst, "_v6") {
				fam = 6
			}
			if want := name != "master-0" && name != BootstrapNode; strings.HasPrefix(inst, "api_") && slices.Contains(peers, rendezvous[fam]) != want {
				t.Errorf("%s %s: peers %v; the rendezvous host's %s among them: want %v", name, inst, peers, rendezvous[fam], want)
			}
			checked++
		}
		h, err := r.plan.Handover(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, hi := range h.Instances {
			if len(slices.Compact(slices.Clone(hi.Peers))) != len(hi.Peers) {
				t.Errorf("%s: handover peers listed twice: %v", name, hi.Peers)
			}
		}
		hcfg := fileOf(files, onnode.HaproxyConfPath)
		for _, backend := range strings.Split(hcfg, "\nbackend ")[1:] {
			seen := map[string]string{}
			for _, line := range strings.Split(backend, "\n") {
				f := strings.Fields(line)
				if len(f) < 3 || f[0] != "server" || slices.Contains(f, "backup") {
					continue
				}
				if other, dup := seen[f[2]]; dup {
					t.Errorf("%s: backend %s has %s twice (%s and %s)", name, strings.Fields(backend)[0], f[2], other, f[1])
				}
				seen[f[2]] = f[1]
			}
		}
	}
	if checked < 7 {
		t.Errorf("%s: %d instances checked", r.config.Metadata.Name, checked)
	}
	boot := fileOf(r.files[BootstrapNode], onnode.HaproxyConfPath)
	if want := "server vipctl_bootstrap 198.51.100.11:6443\n    server master-1 198.51.100.12:6443\n    server master-2 198.51.100.13:6443\n"; !strings.Contains(boot, want) {
		t.Errorf("the bootstrap host's haproxy.cfg lacks\n%s in:\n%s", want, boot)
	}
	if api := instanceBlock(t, fileOf(r.files[BootstrapNode], onnode.KeepalivedConfPath), "api_v4"); !strings.Contains(api, "priority 254") {
		t.Errorf("the bootstrap host's API instance is not at priority 254:\n%s", api)
	}
}

// fieldAfter is the word after key in a keepalived.conf block ("" if none).
func fieldAfter(block, key string) string {
	f := strings.Fields(block)
	if i := slices.Index(f, key); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

// unicastPeers lists the addresses of a block's unicast_peer section.
func unicastPeers(block string) []string {
	_, rest, ok := strings.Cut(block, "unicast_peer {")
	if !ok {
		return nil
	}
	body, _, _ := strings.Cut(rest, "}")
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}
