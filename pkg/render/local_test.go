package render

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

func groupsPlan(t *testing.T, st func(*cluster.State)) *Plan {
	t.Helper()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "pools-node-groups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "groups.yaml"), "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	s := cluster.State{Nodes: nodes}
	st(&s)
	ids := testIDs(c)
	for _, ls := range s.LocalServices {
		ids[v1alpha1.ServiceKey(ls.Name)] = uint8(200 + len(ids))
	}
	p, err := NewPlan(cluster.Compile(c), ids, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func confOf(t *testing.T, p *Plan, node string) string {
	t.Helper()
	files, err := p.NodeFiles(node)
	if err != nil {
		t.Fatal(err)
	}
	return string(files[0].Data)
}

// TestLocalServiceInstance: a Local Service's instance runs on the pool
// nodes with a ready endpoint; with only one such node another pool node
// joins as a peer that the status file keeps in FAULT; nodes outside the
// pool never take part.
func TestLocalServiceInstance(t *testing.T) {
	vip := netip.MustParseAddr("198.51.100.140")
	p := groupsPlan(t, func(s *cluster.State) {
		s.LocalServices = []cluster.LocalService{{Name: "shop/web", Pool: "rack-a", VIPs: []netip.Addr{vip}, Nodes: []string{"worker-a1", "edge-0"}}}
	})
	for node, want := range map[string]bool{"worker-a0": true, "worker-a1": true, "edge-0": false, "master-0": false} {
		conf := confOf(t, p, node)
		if got := strings.Contains(conf, "vrrp_instance service_4_shop_web_v4"); got != want {
			t.Errorf("%s renders the Local Service's instance: %v, want %v", node, got, want)
		}
		if want && !strings.Contains(conf, `file "`+onnode.LocalServiceStatusFile("shop/web")+`"`+"\n    weight 1\n") {
			t.Errorf("%s: the instance does not track the Service's status file with weight 1", node)
		}
	}
	if got := peersOf(t, confOf(t, p, "worker-a1"), "service_4_shop_web_v4"); len(got) != 1 {
		t.Errorf("worker-a1 peers = %v, want the other rack-a node as the one padding peer", got)
	}

	// No endpoint anywhere: no instance (the VIP would only black-hole).
	p = groupsPlan(t, func(s *cluster.State) {
		s.LocalServices = []cluster.LocalService{{Name: "shop/web", Pool: "rack-a", VIPs: []netip.Addr{vip}}}
	})
	for _, n := range []string{"worker-a0", "worker-a1"} {
		if strings.Contains(confOf(t, p, n), "service_4_shop_web") {
			t.Errorf("%s renders a Local Service without endpoints", n)
		}
	}
}

// TestLocalServiceStatus: a node's status file of a Local Service keeps
// its priority with a ready endpoint, lowers it to 1 with only a draining
// one, and puts it in FAULT with none.
func TestLocalServiceStatus(t *testing.T) {
	ls := cluster.LocalService{Name: "shop/web", Nodes: []string{"worker-a1"}, Draining: []string{"worker-a0"}}
	for node, want := range map[string]int{"worker-a1": 0, "worker-a0": -253, "edge-0": -254} {
		if got := LocalServiceStatus(ls, node); got != want {
			t.Errorf("%s: %d, want %d", node, got, want)
		}
	}
}

// TestHaproxyBackendsFollowAPIEndpoints: haproxy balances over the
// control-plane nodes the API endpoints name, and over all of them when
// none (or an unknown address) is named.
func TestHaproxyBackendsFollowAPIEndpoints(t *testing.T) {
	servers := func(eps ...string) []string {
		p := groupsPlan(t, func(s *cluster.State) {
			for _, e := range eps {
				s.APIServers = append(s.APIServers, netip.MustParseAddr(e))
			}
		})
		files, err := p.NodeFiles("master-0")
		if err != nil {
			t.Fatal(err)
		}
		// The API backend's servers, and its backups (the same
		// apiservers while only alive) named after them.
		var out, backups []string
		var section string
		for _, line := range strings.Split(string(files[1].Data), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) > 1 && (f[0] == "backend" || f[0] == "frontend" || f[0] == "listen"):
				section = f[1]
			case section == "api" && len(f) > 2 && f[0] == "server" && slices.Contains(f, "backup"):
				backups = append(backups, strings.TrimSuffix(f[1], "_live"))
			case section == "api" && len(f) > 2 && f[0] == "server":
				out = append(out, f[1])
			}
		}
		if !slices.Equal(backups, out) {
			t.Errorf("with endpoints %v: backup servers %v, want the servers' live twins %v", eps, backups, out)
		}
		return out
	}
	if got := servers("198.51.100.11", "198.51.100.13"); !slices.Equal(got, []string{"master-0", "master-2"}) {
		t.Errorf("with endpoints .11 and .13: servers %v, want master-0 master-2", got)
	}
	for _, eps := range [][]string{nil, {"203.0.113.99"}} {
		if got := servers(eps...); !slices.Equal(got, []string{"master-0", "master-1", "master-2"}) {
			t.Errorf("with endpoints %v: servers %v, want every control-plane node", eps, got)
		}
	}
}

// TestLocalServiceNamesAreUnique: dev/a-web and dev-a/web used to render
// the same instance and track names, which keepalived refuses as a
// duplicate; every node holding both then kept its old config for good.
func TestLocalServiceNamesAreUnique(t *testing.T) {
	p := groupsPlan(t, func(s *cluster.State) {
		s.LocalServices = []cluster.LocalService{
			{Name: "dev/a-web", Pool: "rack-a", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.140")}, Nodes: []string{"worker-a0", "worker-a1"}},
			{Name: "dev-a/web", Pool: "rack-a", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.141")}, Nodes: []string{"worker-a0", "worker-a1"}},
		}
	})
	conf := confOf(t, p, "worker-a0")
	seen := map[string]bool{}
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "vrrp_instance" || f[0] == "vrrp_track_file") && f[2] == "{" {
			if seen[f[0]+" "+f[1]] {
				t.Errorf("%s %s rendered twice", f[0], f[1])
			}
			seen[f[0]+" "+f[1]] = true
		}
	}
	if len(seen) < 4 {
		t.Errorf("want two instances and two track files for the Services, got %v", seen)
	}
	if onnode.LocalServiceStatusFile("dev/a-web") == onnode.LocalServiceStatusFile("dev-a/web") {
		t.Error("both Services share one status file")
	}
}

// TestLocalServiceKeepsDrainingNodes: a node whose endpoint of a Local
// Service is stopping gracefully (terminating, still serving) stays in
// the Service's instance, instead of the peer the instance would
// otherwise be padded with: as its holder it leaves by a priority 0
// advert (its status file puts it in FAULT) rather than by a reload that
// removes the instance, after which the peer would wait for Master_Down.
func TestLocalServiceKeepsDrainingNodes(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	vip := netip.MustParseAddr("198.51.100.150")
	ready := r.nodes[0].Name
	plan := func(draining ...string) *Plan {
		t.Helper()
		return localServicePlan(t, r, cluster.LocalService{Name: "shop/web", Pool: "dual-v4", VIPs: []netip.Addr{vip}, Nodes: []string{ready}, Draining: draining})
	}
	member := func(p *Plan, node string) bool {
		return strings.Contains(confOf(t, p, node), "vrrp_instance service_4_shop_web_v4")
	}
	var pad, draining string
	for _, n := range r.nodes[1:] {
		if member(plan(), n.Name) {
			pad = n.Name
		} else {
			draining = n.Name
		}
	}
	if pad == "" || draining == "" {
		t.Fatalf("want one padding peer among %d other nodes; got pad %q", len(r.nodes)-1, pad)
	}
	p := plan(draining)
	for node, want := range map[string]bool{ready: true, draining: true, pad: false} {
		if got := member(p, node); got != want {
			t.Errorf("%s in the instance: %v, want %v", node, got, want)
		}
	}
}

// localServicePlan is r's plan with the one Local Service ls (VRRP ID 200)
// and no other Service, as the sidecar observes it
// (cluster.Model.ServiceAddresses): a Local Service's addresses are its
// own instance's, not its pool's.
func localServicePlan(t *testing.T, r *renderedExample, ls cluster.LocalService) *Plan {
	t.Helper()
	ids := testIDs(r.config)
	ids[v1alpha1.ServiceKey(ls.Name)] = 200
	p, err := NewPlan(cluster.Compile(r.config), ids, cluster.State{Nodes: r.nodes, LocalServices: []cluster.LocalService{ls}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLocalServiceKeepsUnreadyNodes: a node whose endpoint of a Local
// Service fails its readiness probe stays in the Service's instance, in
// FAULT: every node's keepalived.conf is the one it had while the
// endpoint was ready, so no peer reloads (a reload restarts a backup's
// timers) and the priority 0 advert the holder sends on entering FAULT
// hands the VIP over within the peer's skew time. Where the pool caps
// its holders below every node with an endpoint, an unready node gives
// its place to a ready one.
func TestLocalServiceKeepsUnreadyNodes(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "dual-stack.yaml")
	if len(r.nodes) < 3 {
		t.Fatalf("the example has %d nodes, want 3 or more", len(r.nodes))
	}
	vip := netip.MustParseAddr("198.51.100.150")
	a, b := r.nodes[0].Name, r.nodes[1].Name
	ready := localServicePlan(t, r, cluster.LocalService{Name: "shop/web", Pool: "dual-v4", VIPs: []netip.Addr{vip}, Nodes: []string{a, b}})
	ls := cluster.LocalService{Name: "shop/web", Pool: "dual-v4", VIPs: []netip.Addr{vip}, Nodes: []string{b}, Unready: []string{a}}
	unready := localServicePlan(t, r, ls)
	for _, n := range r.nodes {
		if before, after := confOf(t, ready, n.Name), confOf(t, unready, n.Name); before != after {
			t.Errorf("%s's keepalived.conf changed when %s's endpoint went unready: its keepalived would reload", n.Name, a)
		}
	}
	if !strings.Contains(confOf(t, unready, a), "vrrp_instance service_4_shop_web_v4") {
		t.Errorf("%s left the instance", a)
	}
	if got := LocalServiceStatus(ls, a); got != onnode.LocalNone {
		t.Errorf("%s's status file says %d, want %d (FAULT)", a, got, onnode.LocalNone)
	}

	capped := *r.config
	capped.Spec.ServicePools = slices.Clone(r.config.Spec.ServicePools)
	for i := range capped.Spec.ServicePools {
		capped.Spec.ServicePools[i].MaxHolders = 2
	}
	r2 := *r
	r2.config = &capped
	others := make([]string, 0, len(r.nodes))
	for _, n := range r.nodes[2:] {
		others = append(others, n.Name)
	}
	p := localServicePlan(t, &r2, cluster.LocalService{Name: "shop/web", Pool: "dual-v4", VIPs: []netip.Addr{vip}, Nodes: []string{a, b}, Unready: others})
	for _, n := range others {
		if strings.Contains(confOf(t, p, n), "vrrp_instance service_4_shop_web_v4") {
			t.Errorf("with maxHolders 2, unready %s took a place in the instance", n)
		}
	}
}
