package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpIBGPYAML is the two-rack lab with the nodes in the router's own AS
// 64512: every session is iBGP.
var bgpIBGPYAML = strings.Replace(bgpLabYAML, "    asn: 64513\n", "    asn: 64512\n", 1)

// bgpIBGPSpecs are the two-rack lab's nodes (buildBGPLab).
func bgpIBGPSpecs() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "a0", Addr: "198.51.100.21/24", Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "b0", Addr: "203.0.113.21/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
		{Name: "b1", Addr: "203.0.113.22/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
	}
}

// ibgpRouterAddrs are the router's addresses in the two racks.
// ibgpReflectorFRR is upstreamFRR in the nodes' AS, the nodes its
// route-reflector clients, balancing over their iBGP paths.
func ibgpReflectorFRR() []string {
	return strings.Split(strings.NewReplacer(
		" neighbor nodes remote-as 64513", " neighbor nodes remote-as 64512",
		"  maximum-paths 8", "  maximum-paths ibgp 8\n  neighbor nodes route-reflector-client",
	).Replace(strings.Join(upstreamFRR, "\n")), "\n")
}

var ibgpRouterAddrs = map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "b": {"203.0.113.1/26"}}

// TestBGPIBGP: the nodes peer in the router's own AS (iBGP), the router a
// route reflector with the nodes as its clients (FRR: `route-reflector-
// client`, ECMP over iBGP paths). Every node's session comes up, the
// router installs the bgp pool's address with all three nodes as next
// hops, and a client behind the router reaches it.
func TestBGPIBGP(t *testing.T) {
	lab.RequireFRR(t)
	router := ibgpReflectorFRR()
	lc := lab.Start(t, bgpIBGPYAML, bgpIBGPSpecs())
	bl := newBGPLab(t, lc, ibgpRouterAddrs, router)
	hops := bl.announceEverywhere(t, bgpClusterVIP)
	out, _ := bl.router.Vtysh("show bgp ipv4 unicast " + bgpClusterVIP + "/32")
	if !strings.Contains(out, "Route-Reflector Client") && !strings.Contains(out, "RR-client") {
		t.Errorf("the router does not hold %s from route-reflector clients:\n%s", bgpClusterVIP, out)
	}
	if got := bl.ask(t, bgpClusterVIP, 30); len(got) < 2 {
		t.Errorf("30 connections over iBGP routes answered by %v, want several of %v", got, hops)
	}
}

// TestBGPIBGPBird: the same with BIRD 2 as the route reflector (`rr
// client`, its kernel protocol merging the equal paths).
func TestBGPIBGPBird(t *testing.T) {
	lab.RequireFRR(t)
	lc := lab.Start(t, bgpIBGPYAML, bgpIBGPSpecs())
	lc.AddSegment("c")
	r := lc.AddRouter("upstream", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "b": {"203.0.113.1/26"}, "c": {"203.0.113.65/26"}})
	conf := []string{
		"log stderr all;",
		"router id 198.51.100.1;",
		"protocol device {}",
		"protocol direct { ipv4; }",
		"protocol kernel { ipv4 { export where source = RTS_BGP; }; merge paths on; }",
		"template bgp nodes {",
		"  local as 64512;",
		"  rr client;",
		"  hold time 3; keepalive time 1; connect retry time 1;",
		"  ipv4 { import all; export none; };",
		"}",
	}
	for _, n := range lc.Nodes {
		addr, _, _ := strings.Cut(n.Addr, "/")
		conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+addr+" as 64512; }")
	}
	b := lab.StartBIRD(t, r, conf...)
	for _, n := range lc.Nodes {
		lab.StartFRR(t, n.Host, n.Target.Root)
	}
	lc.AddServiceVIP("racks", netip.MustParseAddr(bgpClusterVIP))
	for _, n := range lc.Nodes {
		onLo(t, n.Host, bgpClusterVIP)
		lc.Apply(n)
	}
	want := []string{"198.51.100.21", "203.0.113.21", "203.0.113.22"}
	if !lab.WaitUntil(30*time.Second, func() bool { return slices.Equal(routeHops(r, bgpClusterVIP), want) }) {
		out, _ := b.Birdc("show", "route", "all")
		t.Fatalf("BIRD's kernel route to %s: next hops %v, want %v\n%s", bgpClusterVIP, routeHops(r, bgpClusterVIP), want, out)
	}
	for _, n := range lc.Nodes {
		if !b.Established(birdName(n.Name)) {
			t.Errorf("BIRD's iBGP session with %s is not Established", n.Name)
		}
	}
}

// TestBGPIBGPBackupRoute: a node whose Local Service endpoints are only
// draining announces the address as a backup route, and to a route
// reflector in the nodes' own AS that route goes at local preference 0,
// not with the eBGP backup's longer AS path (which holds the reflector's
// own AS, and FRR drops it as a loop). The reflector keeps it beside a
// ready node's plain route, which wins, and routes to it alone once it is
// the last: the client is still answered.
func TestBGPIBGPBackupRoute(t *testing.T) {
	lab.RequireFRR(t)
	bl := newBGPLab(t, lab.Start(t, bgpIBGPYAML, bgpIBGPSpecs()), ibgpRouterAddrs, ibgpReflectorFRR())
	holdsBoth := func(vip string) bool {
		out, err := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32")
		return err == nil && strings.Contains(out, "Paths: (2 available") && strings.Contains(out, "localpref 0")
	}
	const vip = bgpLocalVIP
	for _, n := range bl.lc.Nodes {
		onLo(t, n.Host, vip)
	}
	bl.setLocal(t, []string{"b0"}, []string{"a0"})
	bl.waitHops(t, vip, []string{"203.0.113.21"}, 20*time.Second)
	lab.WaitFor(t, 20*time.Second, "the reflector holding a0's backup route at local preference 0 beside b0's", func() bool { return holdsBoth(vip) })
	bl.setLocal(t, nil, []string{"a0"})
	took := bl.waitHops(t, vip, []string{"198.51.100.21"}, 20*time.Second)
	t.Logf("only a draining endpoint left: routed to a0 alone in %s", took.Round(time.Millisecond))
	if got := bl.ask(t, vip, 10); got["a0"] != 10 {
		t.Errorf("answers %v: want all from a0, the draining endpoint's node", got)
	}
}
