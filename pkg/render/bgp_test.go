package render

import (
	"context"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestBGPAnnounced: with policy Cluster every node the pool selects
// announces every address (ECMP upstream); with policy Local only the
// nodes running a ready endpoint announce the Service's address; a bgp
// pool takes no VRRP instance, so no keepalived.conf mentions its
// addresses.
func TestBGPAnnounced(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	cl := netip.MustParseAddr("203.0.113.224")
	local := netip.MustParseAddr("203.0.113.230")
	st := cluster.State{
		Nodes:         r.nodes,
		ServiceVIPs:   map[string][]netip.Addr{"racks": {cl}},
		LocalServices: []cluster.LocalService{{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{local}, Nodes: []string{"worker-b1"}}},
	}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), st)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]netip.Addr{
		"master-0":  nil, // not a worker: the pool's nodeSelector leaves it out
		"worker-a0": {cl},
		"worker-b0": {cl},
		"worker-b1": {cl, local},
	}
	for node, addrs := range want {
		got := p.Announced(node)
		if addrs == nil {
			if len(got) != 0 {
				t.Errorf("%s announces %v, want nothing", node, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Pool != "racks" || !slices.Equal(got[0].Addrs, addrs) {
			t.Errorf("%s announces %v, want racks %v", node, got, addrs)
		}
		files, err := p.NodeFiles(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			switch f.Path {
			case onnode.KeepalivedConfPath:
				if strings.Contains(string(f.Data), "203.0.113.22") || strings.Contains(string(f.Data), "203.0.113.23") {
					t.Errorf("%s: keepalived.conf holds a bgp pool address:\n%s", node, f.Data)
				}
			case onnode.FRRConfPath:
				for _, a := range addrs {
					if !strings.Contains(string(f.Data), "network "+a.String()+"/32\n") {
						t.Errorf("%s: frr.conf does not announce %s:\n%s", node, a, f.Data)
					}
				}
			}
		}
	}
}

// TestBGPAnnouncedDraining: a node whose endpoints of a Local Service are
// all terminating but still serving announces the address as a backup
// route: the same network line (frr-reload.py would withdraw a changed
// one first), named in the family's backup prefix-list, which the
// outbound route-map matches to prepend the nodes' ASN three times. A
// node with a ready endpoint announces it plainly; the others not at
// all.
func TestBGPAnnouncedDraining(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	local := netip.MustParseAddr("203.0.113.230")
	st := cluster.State{
		Nodes:         r.nodes,
		LocalServices: []cluster.LocalService{{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{local}, Nodes: []string{"worker-b1"}, Draining: []string{"worker-a0"}}},
	}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), st)
	if err != nil {
		t.Fatal(err)
	}
	asn := strconv.FormatUint(uint64(r.config.Spec.BGP.ASN), 10)
	const network, backup = "  network 203.0.113.230/32\n", "ip prefix-list vipctl-backup4 seq 10 permit 203.0.113.230/32\n"
	for node, want := range map[string][]bool{ // announced, as a backup
		"worker-b1": {true, false},
		"worker-a0": {true, true},
		"worker-b0": {false, false},
	} {
		var conf string
		files, err := p.NodeFiles(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == onnode.FRRConfPath {
				conf = string(f.Data)
			}
		}
		if !strings.Contains(conf, "route-map vipctl-out permit 5\n match ip address prefix-list vipctl-backup4\n set as-path prepend "+asn+" "+asn+" "+asn+"\n") {
			t.Errorf("%s: frr.conf lacks the backup entry of vipctl-out:\n%s", node, conf)
		}
		if got := []bool{strings.Contains(conf, network), strings.Contains(conf, backup)}; !slices.Equal(got, want) {
			t.Errorf("%s: announces 203.0.113.230, as a backup: %v, want %v:\n%s", node, got, want, conf)
		}
	}
	if got := p.Announced("worker-a0"); len(got) != 1 || len(got[0].Addrs) != 0 || !slices.Equal(got[0].Backup, []netip.Addr{local}) {
		t.Errorf("worker-a0 announces %+v, want %s as a backup only", got, local)
	}
}

// TestBGPAnnouncedProxyPending: a node whose ready endpoint of a Local
// Service its service proxy does not deliver to yet (WithProxyPending)
// does not announce the address, not even as a backup (a router would
// spread the traffic over it and a draining node's backup); another node
// with a ready endpoint, rendered from the same plan, still announces it
// plainly, and so does the pending node for a Service not named.
func TestBGPAnnouncedProxyPending(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	web, shop := netip.MustParseAddr("203.0.113.230"), netip.MustParseAddr("203.0.113.231")
	st := cluster.State{
		Nodes: r.nodes,
		LocalServices: []cluster.LocalService{
			{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{web}, Nodes: []string{"worker-a0", "worker-b1"}},
			{Name: "shop/local", Pool: "racks", VIPs: []netip.Addr{shop}, Nodes: []string{"worker-a0"}},
		},
	}
	p, err := NewPlan(cluster.Compile(r.config), testIDs(r.config), st, WithProxyPending("worker-a0", map[string]bool{"web/local": true}))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Announced("worker-a0")
	if len(got) != 1 || !slices.Equal(got[0].Addrs, []netip.Addr{shop}) || len(got[0].Backup) != 0 {
		t.Errorf("worker-a0 announces %+v, want %s plainly and %s not at all", got, shop, web)
	}
	got = p.Announced("worker-b1")
	if len(got) != 1 || !slices.Equal(got[0].Addrs, []netip.Addr{web}) || len(got[0].Backup) != 0 {
		t.Errorf("worker-b1 announces %+v, want %s plainly", got, web)
	}
}

// TestBGPAnnouncedDrained: a drained node (`vipctl drain`) announces
// every address it announced, Cluster and Local alike, as a backup, with
// the same network lines (frr-reload.py changes only the prefix lists);
// the other nodes announce as before.
func TestBGPAnnouncedDrained(t *testing.T) {
	t.Parallel()
	plain, drained, local := plansBesideWorkerA0(t, WithDrained("worker-a0"))
	before, after := plain.Announced("worker-a0"), drained.Announced("worker-a0")
	if len(before) != 1 || len(before[0].Addrs) < 2 || !slices.Contains(before[0].Addrs, local) {
		t.Fatalf("worker-a0 undrained announces %+v, want the pool's addresses and %s", before, local)
	}
	if len(after) != 1 || len(after[0].Addrs) != 0 || !slices.Equal(after[0].Backup, before[0].Addrs) {
		t.Errorf("worker-a0 drained announces %+v, want %v as backups only", after, before[0].Addrs)
	}
	if a, b := plain.Announced("worker-b1"), drained.Announced("worker-b1"); !reflect.DeepEqual(a, b) {
		t.Errorf("worker-b1 announces %+v with worker-a0 drained, %+v without", b, a)
	}
	networks := func(p *Plan) []string {
		var out []string
		files, err := p.NodeFiles("worker-a0")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == onnode.FRRConfPath {
				for _, l := range strings.Split(string(f.Data), "\n") {
					if strings.HasPrefix(strings.TrimSpace(l), "network ") {
						out = append(out, l)
					}
				}
			}
		}
		return out
	}
	if a, b := networks(plain), networks(drained); len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("network lines undrained %q, drained %q: want the same", a, b)
	}
}

// plansBesideWorkerA0 plans examples/bgp-two-racks.yaml with a Cluster
// Service's address in pool racks and a Local one's (local) with
// endpoints on worker-a0 and worker-b1: as it is, and with opts.
func plansBesideWorkerA0(t *testing.T, opts ...PlanOption) (plain, with *Plan, local netip.Addr) {
	t.Helper()
	r := renderExample(t, "bgp-two-racks.yaml")
	local = netip.MustParseAddr("203.0.113.230")
	st := cluster.State{
		Nodes:         r.nodes,
		ServiceVIPs:   map[string][]netip.Addr{"racks": {netip.MustParseAddr("203.0.113.231")}},
		LocalServices: []cluster.LocalService{{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{local}, Nodes: []string{"worker-a0", "worker-b1"}}},
	}
	m, ids := cluster.Compile(r.config), testIDs(r.config)
	plain, err := NewPlan(m, ids, st)
	if err != nil {
		t.Fatal(err)
	}
	with, err = NewPlan(m, ids, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return plain, with, local
}

// TestBGPAnnouncedHeldBack: a node held back after its boot (its
// sidecar not synced yet: runtimecfg.BootInput) announces its Cluster
// policy addresses only as backups, so that the routers keep sending to
// the nodes that serve while its service proxy may not yet, and its
// Local ones not at all (WithProxyPending, as BootInput renders it); the
// other nodes announce as before.
func TestBGPAnnouncedHeldBack(t *testing.T) {
	t.Parallel()
	plain, held, local := plansBesideWorkerA0(t, WithHeldBack("worker-a0"), WithProxyPending("worker-a0", map[string]bool{"web/local": true}))
	before, after := plain.Announced("worker-a0"), held.Announced("worker-a0")
	cluster := slices.DeleteFunc(slices.Clone(before[0].Addrs), func(a netip.Addr) bool { return a == local })
	if len(after) != 1 || len(after[0].Addrs) != 0 || !slices.Equal(after[0].Backup, cluster) || len(cluster) == 0 {
		t.Errorf("worker-a0 held back announces %+v, want %v as backups only (not %s)", after, cluster, local)
	}
	if a, b := plain.Announced("worker-b1"), held.Announced("worker-b1"); !reflect.DeepEqual(a, b) {
		t.Errorf("worker-b1 announces %+v with worker-a0 held back, %+v without", b, a)
	}
}

// TestRouterID: a node's first IPv4 address; on an IPv6-only node the low
// 32 bits of its address (bgpd would find no router-id there and never
// bring a session up), or a hash of its name when those bits are zero.
func TestRouterID(t *testing.T) {
	t.Parallel()
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		addrs []netip.Addr
		want  string
	}{
		{"dual-stack", addrs("2001:db8:1::21", "198.51.100.21"), "198.51.100.21"},
		{"ipv6-only", addrs("2001:db8:1::21"), "0.0.0.33"},
		{"ipv6-only, high bits", addrs("2001:db8:1::c633:6415"), "198.51.100.21"},
		{"no address", nil, ""},
	} {
		if got := routerID("n", tc.addrs); got != tc.want {
			t.Errorf("%s: routerID(%v) = %q, want %q", tc.name, tc.addrs, got, tc.want)
		}
	}
	a, b := routerID("worker-0", addrs("2001:db8:1::")), routerID("worker-1", addrs("2001:db8:2::"))
	if a == "" || a == "0.0.0.0" || a == b || a != routerID("worker-0", addrs("2001:db8:1::")) {
		t.Errorf("zero low bits: worker-0 %q, worker-1 %q: want distinct, stable, non-zero ids", a, b)
	}
}

// TestBGPSessionsBeforeAnyBGPPool: with spec.bgp but every pool vrrp, the
// nodes still get a frr.conf with their peers and nothing to announce,
// so the sessions are up before a pool moves to bgp and the move is one
// reload that adds networks.
func TestBGPSessionsBeforeAnyBGPPool(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	c.Spec.ServicePools = slices.Clone(c.Spec.ServicePools)
	for i := range c.Spec.ServicePools {
		c.Spec.ServicePools[i].Mode = v1alpha1.PoolModeVRRP
	}
	p, err := NewPlan(cluster.Compile(&c), testIDs(&c), cluster.State{Nodes: r.nodes})
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.NodeFiles("worker-b0")
	if err != nil {
		t.Fatal(err)
	}
	var frr string
	for _, f := range files {
		if f.Path == onnode.FRRConfPath {
			frr = string(f.Data)
		}
	}
	if !strings.Contains(frr, "neighbor 203.0.113.1 remote-as 64512\n") || strings.Contains(frr, "\n  network ") {
		t.Errorf("worker-b0's frr.conf with spec.bgp and no bgp pool: want its peer and no network\n%s", frr)
	}
}

// TestBGPPassword: a peer's password, once read (State.BGPPasswords),
// is on its neighbor's password line in frr.conf, which is then root's
// alone (0600) and still accepted by vtysh; before it is read the line
// is left out and the file is 0644. Only the peer that names the Secret
// gets it.
func TestBGPPassword(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	bgp := *c.Spec.BGP
	bgp.Peers = slices.Clone(bgp.Peers)
	bgp.Peers[0].PasswordSecret = "rack-a"
	c.Spec.BGP = &bgp
	frrConf := func(pw map[string]string, node string) onnode.File {
		t.Helper()
		return nodeFRRConf(t, &c, cluster.State{Nodes: r.nodes, BGPPasswords: pw}, node)
	}
	peer := bgp.Peers[0]
	var a, other string
	for _, n := range r.nodes {
		switch {
		case a == "" && cluster.Matches(peer.NodeSelector, n.Labels):
			a = n.Name
		case other == "" && !cluster.Matches(peer.NodeSelector, n.Labels):
			other = n.Name
		}
	}
	f := frrConf(map[string]string{"rack-a": "s3cret!x"}, a)
	if line := " neighbor " + peer.Address + " password s3cret!x\n"; !strings.Contains(string(f.Data), line) || f.Mode != 0o600 {
		t.Errorf("%s: frr.conf (mode %v) lacks %q or is not 0600:\n%s", a, f.Mode, line, f.Data)
	}
	if err := frr.Check(context.Background(), f.Data, configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses frr.conf with a password: %v", err)
	}
	if g := frrConf(map[string]string{"rack-a": "s3cret!x"}, other); strings.Contains(string(g.Data), "password") || g.Mode != 0o644 {
		t.Errorf("%s, which peers with no router of that Secret: frr.conf (mode %v) has a password:\n%s", other, g.Mode, g.Data)
	}
	if g := frrConf(nil, a); strings.Contains(string(g.Data), "password") || g.Mode != 0o644 {
		t.Errorf("%s before the password is read: frr.conf (mode %v) has a password line:\n%s", a, g.Mode, g.Data)
	}
}

// TestBGPMultihopRender: a multi-hop peer's TTL is on its neighbor's
// line, and frr.conf lets next-hop tracking resolve through the default
// route (which vtysh accepts); without one neither is there.
func TestBGPMultihopRender(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	conf := func(hops int32) string {
		t.Helper()
		c := *r.config
		bgp := *c.Spec.BGP
		bgp.Peers = slices.Clone(bgp.Peers)
		for i := range bgp.Peers {
			bgp.Peers[i].EBGPMultihop = hops
		}
		c.Spec.BGP = &bgp
		p, err := NewPlan(cluster.Compile(&c), testIDs(&c), cluster.State{Nodes: r.nodes})
		if err != nil {
			t.Fatal(err)
		}
		files, err := p.NodeFiles("worker-a0")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == onnode.FRRConfPath {
				return string(f.Data)
			}
		}
		t.Fatal("worker-a0: no frr.conf")
		return ""
	}
	multi := conf(3)
	for _, want := range []string{"\nip nht resolve-via-default\n", "\nipv6 nht resolve-via-default\n", " ebgp-multihop 3\n"} {
		if !strings.Contains(multi, want) {
			t.Errorf("multi-hop frr.conf lacks %q:\n%s", want, multi)
		}
	}
	if err := frr.Check(context.Background(), []byte(multi), configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses the multi-hop frr.conf: %v", err)
	}
	if direct := conf(0); strings.Contains(direct, "nht resolve-via-default") || strings.Contains(direct, "ebgp-multihop") {
		t.Errorf("frr.conf without a multi-hop peer has its lines:\n%s", direct)
	}
}

// TestBGPPolicyRender: a bgp pool's policy reaches frr.conf as route-map
// entries matched by the pool's ranges (prepend, communities, large
// communities), which the first entries jump to; a Cluster Service's
// address is announced as the pool's aggregate, a Local Service's as its
// /32; a peer the pool's bgp.peers leaves out gets an outbound
// prefix-list denying the pool's ranges. vtysh accepts the file. Without
// a policy frr.conf has none of it.
func TestBGPPolicyRender(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	cl := netip.MustParseAddr("203.0.113.225")
	local := netip.MustParseAddr("203.0.113.230")
	conf := func(pb *v1alpha1.PoolBGP, node string) string {
		t.Helper()
		c := *r.config
		c.Spec.ServicePools = slices.Clone(c.Spec.ServicePools)
		c.Spec.ServicePools[0].BGP = pb
		if err := v1alpha1.Validate(&c); err != nil {
			t.Fatal(err)
		}
		st := cluster.State{Nodes: r.nodes, ServiceVIPs: map[string][]netip.Addr{"racks": {cl}},
			LocalServices: []cluster.LocalService{{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{local}, Nodes: []string{"worker-a0", "worker-b1"}}}}
		f := nodeFRRConf(t, &c, st, node)
		if err := frr.Check(context.Background(), f.Data, configcheck.Options{}); err != nil {
			t.Errorf("vtysh refuses %s's frr.conf: %v\n%s", node, err, f.Data)
		}
		return string(f.Data)
	}
	pref := uint32(200)
	pb := &v1alpha1.PoolBGP{Peers: []string{"198.51.100.1"}, Communities: []string{"64512:7"}, LargeCommunities: []string{"4200000001:1:2"},
		ASPathPrepend: 2, AggregationLength: 28}
	a0 := conf(pb, "worker-a0")
	for _, want := range []string{
		"\nip prefix-list vipctl-pool-racks-4 seq 5 permit 203.0.113.224/28 le 32\n",
		"\nroute-map vipctl-out permit 100\n match ip address prefix-list vipctl-pool-racks-4\n set as-path prepend 64513 64513\n" +
			" set community 64512:7 additive\n set large-community 4200000001:1:2 additive\nexit\n",
		"\nroute-map vipctl-out permit 10\n set community 64512:100 additive\n on-match goto 100\nexit\n",
		"\nroute-map vipctl-out permit 65000\nexit\n",
		"\n  network 203.0.113.224/28\n", "\n  network 203.0.113.230/32\n",
	} {
		if !strings.Contains(a0, want) {
			t.Errorf("worker-a0's frr.conf lacks %q:\n%s", want, a0)
		}
	}
	if strings.Contains(a0, "network 203.0.113.225/32") || strings.Contains(a0, "prefix-list vipctl-to-") {
		t.Errorf("worker-a0's frr.conf announces the aggregated /32 or filters its peer:\n%s", a0)
	}
	b0 := conf(pb, "worker-b0")
	for _, want := range []string{
		"\nip prefix-list vipctl-to-203.0.113.1 seq 5 deny 203.0.113.224/28 le 32\nip prefix-list vipctl-to-203.0.113.1 seq 6 permit 0.0.0.0/0 le 32\n",
		"\n  neighbor 203.0.113.1 prefix-list vipctl-to-203.0.113.1 out\n",
	} {
		if !strings.Contains(b0, want) {
			t.Errorf("worker-b0's frr.conf lacks %q:\n%s", want, b0)
		}
	}
	// localPref needs an iBGP peer: the racks' routers are eBGP.
	c := *r.config
	c.Spec.ServicePools = slices.Clone(c.Spec.ServicePools)
	c.Spec.ServicePools[0].BGP = &v1alpha1.PoolBGP{LocalPref: &pref}
	if err := v1alpha1.Validate(&c); err == nil || !strings.Contains(err.ToAggregate().Error(), "spec.servicePools[0].bgp.localPref") {
		t.Errorf("localPref with eBGP peers alone: %v, want refused at spec.servicePools[0].bgp.localPref", err)
	}
	plain := conf(nil, "worker-a0")
	for _, no := range []string{"on-match", "vipctl-pool-", "permit 65000", "network 203.0.113.224/28"} {
		if strings.Contains(plain, no) {
			t.Errorf("frr.conf without a pool policy has %q:\n%s", no, plain)
		}
	}
}

// nodeFRRConf renders c with st and returns node's frr.conf.
func nodeFRRConf(t *testing.T, c *v1alpha1.ClusterVIPs, st cluster.State, node string) onnode.File {
	t.Helper()
	p, err := NewPlan(cluster.Compile(c), testIDs(c), st)
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.NodeFiles(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == onnode.FRRConfPath {
			return f
		}
	}
	t.Fatalf("%s: no frr.conf", node)
	return onnode.File{}
}

// TestBGPIBGPRouteMap: an iBGP peer gets vipctl-out-ibgp, where a backup
// route goes at local preference 0 rather than with the nodes' ASN
// prepended (which the peer would drop as a loop); with a pool's policy
// the backup entries come after the pool's, so that 0 is the last word on
// a backup of a pool with a localPref. vtysh accepts both.
func TestBGPIBGPRouteMap(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	bgp := *c.Spec.BGP
	bgp.ASN = 64512 // the routers' AS: iBGP
	c.Spec.BGP = &bgp
	local := netip.MustParseAddr("203.0.113.230")
	st := cluster.State{Nodes: r.nodes, LocalServices: []cluster.LocalService{{Name: "web/local", Pool: "racks", VIPs: []netip.Addr{local}, Draining: []string{"worker-a0"}}}}
	conf := func(pb *v1alpha1.PoolBGP) string {
		t.Helper()
		c.Spec.ServicePools = slices.Clone(r.config.Spec.ServicePools)
		c.Spec.ServicePools[0].BGP = pb
		if err := v1alpha1.Validate(&c); err != nil {
			t.Fatal(err)
		}
		f := nodeFRRConf(t, &c, st, "worker-a0")
		if err := frr.Check(context.Background(), f.Data, configcheck.Options{}); err != nil {
			t.Errorf("vtysh refuses worker-a0's frr.conf: %v\n%s", err, f.Data)
		}
		return string(f.Data)
	}
	plain := conf(nil)
	for _, want := range []string{
		"\nip prefix-list vipctl-backup4 seq 10 permit 203.0.113.230/32\n",
		"\nroute-map vipctl-out-ibgp permit 5\n match ip address prefix-list vipctl-backup4\n set local-preference 0\n set community 64512:100 additive\nexit\n",
		"\n  neighbor 198.51.100.1 route-map vipctl-out-ibgp out\n",
	} {
		if !strings.Contains(plain, want) {
			t.Errorf("iBGP frr.conf lacks %q:\n%s", want, plain)
		}
	}
	pref := uint32(250)
	pol := conf(&v1alpha1.PoolBGP{LocalPref: &pref})
	for _, want := range []string{
		"\nroute-map vipctl-out-ibgp permit 10\n set community 64512:100 additive\n on-match goto 100\nexit\n" +
			"route-map vipctl-out-ibgp permit 100\n match ip address prefix-list vipctl-pool-racks-4\n set local-preference 250\n on-match goto 60000\nexit\n" +
			"route-map vipctl-out-ibgp permit 60000\n match ip address prefix-list vipctl-backup4\n set local-preference 0\nexit\n",
		"\nroute-map vipctl-out-ibgp permit 65000\nexit\n",
	} {
		if !strings.Contains(pol, want) {
			t.Errorf("iBGP frr.conf with a localPref lacks %q:\n%s", want, pol)
		}
	}
}

// TestBGPGracefulRestartRender: a peer with gracefulRestart gets FRR's
// per-neighbor graceful restart, and the node says it keeps its
// forwarding state, announces spec.bgp.gracefulRestartTime (30 s by
// default) and no N bit; vtysh accepts it. Without it none of that.
func TestBGPGracefulRestartRender(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	conf := func(gr bool, restart string) string {
		t.Helper()
		c := *r.config
		bgp := *c.Spec.BGP
		bgp.Peers = slices.Clone(bgp.Peers)
		bgp.Peers[0].GracefulRestart = gr
		bgp.GracefulRestartTime = restart
		c.Spec.BGP = &bgp
		if err := v1alpha1.Validate(&c); err != nil {
			t.Fatal(err)
		}
		f := nodeFRRConf(t, &c, cluster.State{Nodes: r.nodes}, "worker-a0")
		if err := frr.Check(context.Background(), f.Data, configcheck.Options{}); err != nil {
			t.Errorf("vtysh refuses worker-a0's frr.conf: %v\n%s", err, f.Data)
		}
		return string(f.Data)
	}
	for restart, secs := range map[string]string{"": "30", "2m": "120"} {
		gr := conf(true, restart)
		for _, want := range []string{
			"\n bgp graceful-restart preserve-fw-state\n bgp graceful-restart restart-time " + secs + "\n no bgp graceful-restart notification\n",
			"\n neighbor 198.51.100.1 graceful-restart\n",
		} {
			if !strings.Contains(gr, want) {
				t.Errorf("gracefulRestartTime %q: frr.conf lacks %q:\n%s", restart, want, gr)
			}
		}
	}
	if plain := conf(false, ""); strings.Contains(plain, "graceful-restart") {
		t.Errorf("frr.conf without gracefulRestart has graceful-restart lines:\n%s", plain)
	}
}

// TestBGPUnnumberedRender: rack a's nodes peer unnumbered on eth1 (a
// pool with IPv4 and IPv6 addresses needs no numbered IPv6 peer: the
// session carries both), rack b's by address, dualStack. worker-a0's frr.conf
// names the interface, activates it in both families with its filter in
// each (the pool of rack b's router alone is denied to it), and keeps
// the node's router advertisements on eth1 from making it a default
// router; vtysh accepts it. worker-b0's file has no interface block.
func TestBGPUnnumberedRender(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	c.Spec.BGP = &v1alpha1.BGPSpec{ASN: 64513, Peers: []v1alpha1.BGPPeer{
		{Interface: "eth1", ASN: 64512, BFD: true, NodeSelector: map[string]string{"topology.kubernetes.io/zone": "rack-a"}},
		{Address: "203.0.113.1", ASN: 64512, DualStack: true, NodeSelector: map[string]string{"topology.kubernetes.io/zone": "rack-b"}},
		{Address: "2001:db8::1", ASN: 64512, DualStack: true, NodeSelector: map[string]string{"topology.kubernetes.io/zone": "rack-b"}},
	}}
	c.Spec.ServicePools = []v1alpha1.ServicePool{
		{Name: "racks", Mode: v1alpha1.PoolModeBGP, Addresses: []string{"203.0.113.224/28", "2001:db8:f::/124"}},
		{Name: "b-only", Mode: v1alpha1.PoolModeBGP, Addresses: []string{"203.0.113.208/28"}, BGP: &v1alpha1.PoolBGP{Peers: []string{"203.0.113.1"}}},
	}
	v1alpha1.SetDefaults(&c)
	if err := v1alpha1.Validate(&c); err != nil {
		t.Fatal(err)
	}
	st := cluster.State{Nodes: r.nodes, ServiceVIPs: map[string][]netip.Addr{"racks": {netip.MustParseAddr("203.0.113.225"), netip.MustParseAddr("2001:db8:f::5")}}}
	a0 := nodeFRRConf(t, &c, st, "worker-a0")
	if err := frr.Check(context.Background(), a0.Data, configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses worker-a0's frr.conf: %v\n%s", err, a0.Data)
	}
	for _, want := range []string{
		"\ninterface eth1\n ipv6 nd ra-lifetime 0\nexit\n",
		"\n neighbor eth1 interface remote-as 64512\n",
		"\n neighbor eth1 bfd\n",
		"\n address-family ipv4 unicast\n  network 203.0.113.225/32\n  neighbor eth1 activate\n",
		"\n address-family ipv6 unicast\n  network 2001:db8:f::5/128\n  neighbor eth1 activate\n",
		"\nip prefix-list vipctl-to-if-eth1 seq 5 deny 203.0.113.208/28 le 32\n",
		"\n  neighbor eth1 prefix-list vipctl-to-if-eth1 out\n",
	} {
		if !strings.Contains(string(a0.Data), want) {
			t.Errorf("worker-a0's frr.conf lacks %q:\n%s", want, a0.Data)
		}
	}
	if strings.Contains(string(a0.Data), "ipv6 prefix-list vipctl-to-if-eth1") {
		t.Errorf("worker-a0's frr.conf filters IPv6 to eth1, where no pool denies any:\n%s", a0.Data)
	}
	b0 := nodeFRRConf(t, &c, st, "worker-b0")
	if strings.Contains(string(b0.Data), "\ninterface ") || strings.Contains(string(b0.Data), " interface remote-as") {
		t.Errorf("worker-b0 peers by address, yet its frr.conf names an interface:\n%s", b0.Data)
	}
	// Rack b's peers are dualStack: each session carries both families,
	// and the IPv6 one negotiates the extended next hop for IPv4.
	if err := frr.Check(context.Background(), b0.Data, configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses worker-b0's frr.conf: %v\n%s", err, b0.Data)
	}
	for _, want := range []string{
		"\n neighbor 2001:db8::1 capability extended-nexthop\n",
		"\n address-family ipv4 unicast\n  network 203.0.113.225/32\n  neighbor 203.0.113.1 activate\n",
		"\n  neighbor 2001:db8::1 activate\n  neighbor 2001:db8::1 route-map vipctl-in in\n  neighbor 2001:db8::1 route-map vipctl-out out\n  neighbor 2001:db8::1 prefix-list vipctl-to-2001-db8--1 out\n exit-address-family\n !\n address-family ipv6 unicast\n",
		"\n address-family ipv6 unicast\n  network 2001:db8:f::5/128\n  neighbor 203.0.113.1 activate\n",
	} {
		if !strings.Contains(string(b0.Data), want) {
			t.Errorf("worker-b0's frr.conf lacks %q:\n%s", want, b0.Data)
		}
	}
	if strings.Contains(string(b0.Data), "203.0.113.1 capability extended-nexthop") {
		t.Errorf("worker-b0's frr.conf asks the extended next hop of its IPv4 session:\n%s", b0.Data)
	}
}

// TestBGPRoutedAPIRender: with spec.api.routed the API VIP (outside
// every machine network) has members in both racks, each speaking VRRP
// from its own address to the others' across the router, with no TTL
// check (the adverts cross a router); every control-plane node's
// frr.conf redistributes the VIP's connected route, which exists only on
// the holder, and vtysh accepts it; a worker's has no such line for the
// API VIP but one for the routed ingress VIP (a router candidate); the
// API instance is in no node's handover (no segment joins its members).
func TestBGPRoutedAPIRender(t *testing.T) {
	t.Parallel()
	p := routedTwoRacks(t, nil)
	files, err := p.NodeFiles("master-2")
	if err != nil {
		t.Fatal(err)
	}
	ka := fileOf(files, onnode.KeepalivedConfPath)
	for _, want := range []string{"unicast_src_ip 203.0.113.13\n", "        198.51.100.11\n", "        198.51.100.12\n", "        203.0.113.150/32 dev "} {
		if !strings.Contains(ka, want) {
			t.Errorf("master-2's keepalived.conf lacks %q:\n%s", want, ka)
		}
	}
	if strings.Contains(ka, "198.51.100.11 min_ttl") {
		t.Errorf("master-2's keepalived.conf checks the TTL of adverts that cross a router:\n%s", ka)
	}
	fc := fileOf(files, onnode.FRRConfPath)
	for _, want := range []string{
		"\nip prefix-list vipctl-held4 seq 5 permit 203.0.113.150/32\n",
		"\nroute-map vipctl-held permit 10\n match ip address prefix-list vipctl-held4\nexit\n",
		"\n address-family ipv4 unicast\n  redistribute connected route-map vipctl-held\n",
	} {
		if !strings.Contains(fc, want) {
			t.Errorf("master-2's frr.conf lacks %q:\n%s", want, fc)
		}
	}
	if err := frr.Check(context.Background(), []byte(fc), configcheck.Options{}); err != nil {
		t.Errorf("vtysh refuses master-2's frr.conf: %v\n%s", err, fc)
	}
	worker, err := p.NodeFiles("worker-a0")
	if err != nil {
		t.Fatal(err)
	}
	if wc := fileOf(worker, onnode.FRRConfPath); strings.Contains(wc, "203.0.113.150") || !strings.Contains(wc, "\nip prefix-list vipctl-held4 seq 5 permit 203.0.113.151/32\n") {
		t.Errorf("worker-a0, a router candidate and no control-plane node, redistributes the API VIP or not the ingress VIP:\n%s", wc)
	}
	h, err := p.Handover("master-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, hi := range h.Instances {
		if slices.Contains(hi.VIPs, netip.MustParseAddr("203.0.113.150")) {
			t.Errorf("the routed API VIP is in master-0's handover: %+v", hi)
		}
	}
}

// routedTwoRacks plans examples/bgp-two-racks.yaml with the API VIP
// 203.0.113.150 and the default IngressController's 203.0.113.151
// routed, master-2 moved to rack b (203.0.113.13), and bootstrap, when
// not nil, as spec.bootstrap.
func routedTwoRacks(t *testing.T, bootstrap *v1alpha1.BootstrapSpec) *Plan {
	t.Helper()
	r := renderExample(t, "bgp-two-racks.yaml")
	c := *r.config
	c.Spec.API.VIPs = []string{"203.0.113.150"}
	c.Spec.MachineNetworks = []string{"198.51.100.0/24", "203.0.113.0/26"}
	c.Spec.ServicePools = []v1alpha1.ServicePool{{Name: "racks", Mode: v1alpha1.PoolModeBGP, Addresses: []string{"203.0.113.224/28"}}}
	c.Spec.API.Routed = true
	c.Spec.Ingress = []v1alpha1.IngressSpec{{Name: "default", VIPs: []string{"203.0.113.151"}, Routed: true}}
	c.Spec.Bootstrap = bootstrap
	v1alpha1.SetDefaults(&c)
	if err := v1alpha1.Validate(&c); err != nil {
		t.Fatal(err)
	}
	nodes := slices.Clone(r.nodes)
	for i, n := range nodes {
		if n.Name == "master-2" { // to rack b
			nodes[i].Addresses = []netip.Addr{netip.MustParseAddr("203.0.113.13")}
			nodes[i].Labels = maps.Clone(n.Labels)
			nodes[i].Labels["topology.kubernetes.io/zone"] = "rack-b"
		}
	}
	p, err := NewPlan(cluster.Compile(&c), testIDs(&c), cluster.State{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
