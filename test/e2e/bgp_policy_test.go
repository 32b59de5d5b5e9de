package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpPolicyYAML has two bgp pools with policies of their own, one node
// and two routers on its segment: "edge" (198.51.100.1, eBGP) gets the
// web pool alone, aggregated to its /28, with communities, a large
// community and a prepended path; "rr" (198.51.100.2, iBGP, a route
// reflector's place) gets the dmz pool alone, with a local preference.
const bgpPolicyYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: policylab
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api:
    vips: [198.51.100.5]
  servicePools:
    - name: web
      mode: bgp
      addresses: [203.0.113.192/28]
      bgp:
        peers: [198.51.100.1]
        communities: ["64512:7"]
        largeCommunities: ["4200000001:1:2"]
        asPathPrepend: 2
        aggregationLength: 28
    - name: dmz
      mode: bgp
      addresses: [203.0.113.208/28]
      bgp:
        peers: [198.51.100.2]
        localPref: 250
  bgp:
    asn: 64513
    communities: ["64512:100"]
    peers:
      - address: 198.51.100.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
      - address: 198.51.100.2
        asn: 64513
        holdTime: 3s
        keepaliveTime: 1s
`

// The policy lab's Service addresses: a Cluster one of web (announced as
// web's /28), a Local one of web (its own /32), a Cluster one of dmz.
const (
	policyWebCluster = "203.0.113.200"
	policyWebLocal   = "203.0.113.201"
	policyDMZ        = "203.0.113.210"
	policyWebRoute   = "203.0.113.192/28"
)

// policyRouter is what a test reads off one router: whether it holds a
// route, and the route's attributes in the router's own words.
type policyRouter struct {
	has   func(prefix string) bool
	attrs func(prefix string) string
	// neverReset tells whether the node's session was established once
	// and never dropped (nil: the router cannot tell).
	neverReset func() bool
}

// TestBGPPolicy: each pool's policy as FRR routers see it. The eBGP
// router holds web's aggregate (not the Cluster Service's /32) and the
// Local Service's /32, each with the path 64513 64513 64513 (two
// prepends), the communities of the pool and spec.bgp, and the large
// community; it holds nothing of dmz. The iBGP router holds dmz's
// address at local preference 250 and nothing of web. A day-2 edit of
// both policies (a reload) reaches the routes the routers hold without a
// session reset.
func TestBGPPolicy(t *testing.T) {
	testBGPPolicy(t, func(edge, rr *netlab.Host) (policyRouter, policyRouter) {
		start := func(h *netlab.Host, id, asn string, ibgp bool) policyRouter {
			conf := []string{
				"frr defaults traditional", "hostname " + h.Name, "log stdout informational",
				"router bgp " + asn, " bgp router-id " + id, " no bgp ebgp-requires-policy",
				" neighbor nodes peer-group", " neighbor nodes remote-as 64513", " neighbor nodes timers 1 3",
				" bgp listen range 198.51.100.0/24 peer-group nodes",
			}
			if ibgp {
				conf = append(conf, " address-family ipv4 unicast", "  neighbor nodes route-reflector-client", " exit-address-family")
			}
			dir := lab.SharedDir(t, "vipctl-bgp-"+h.Name+"-")
			lab.WriteFRRConf(t, dir, append(conf, "exit")...)
			f := lab.StartFRR(t, h, dir)
			show := func(prefix string) string {
				out, err := f.Vtysh("show bgp ipv4 unicast " + prefix)
				if err != nil {
					return ""
				}
				return out
			}
			return policyRouter{
				has:   func(prefix string) bool { return strings.Contains(show(prefix), "best") },
				attrs: show,
				neverReset: func() bool {
					out, err := f.Vtysh("show bgp neighbors")
					return err == nil && strings.Contains(out, "Connections established 1; dropped 0")
				},
			}
		}
		return start(edge, "198.51.100.1", "64512", false), start(rr, "198.51.100.2", "64513", true)
	}, map[string][]string{
		// FRR's `show bgp` words for each attribute.
		"web": {"64513 64513 64513", "Community: 64512:7 64512:100", "Large Community: 4200000001:1:2"},
		"dmz": {"localpref 250"},
		// After the day-2 edit.
		"web2": {"Community: 64512:8 64512:100"},
		"dmz2": {"localpref 300"},
	})
}

// TestBGPPolicyBird: the same with BIRD 2 as both routers, in BIRD's
// words (bgp_path, bgp_community, bgp_large_community, bgp_local_pref).
func TestBGPPolicyBird(t *testing.T) {
	testBGPPolicy(t, func(edge, rr *netlab.Host) (policyRouter, policyRouter) {
		start := func(h *netlab.Host, id, asn string, ibgp bool) policyRouter {
			conf := []string{
				"log stderr all;", "router id " + id + ";", "protocol device {}",
				"protocol bgp node {",
				"  local " + id + " as " + asn + ";",
				"  neighbor 198.51.100.21 as 64513;",
				"  hold time 3; keepalive time 1; connect retry time 1;",
				"  ipv4 { import all; export none; };",
			}
			if ibgp {
				conf = append(conf, "  rr client;")
			}
			b := lab.StartBIRD(t, h, append(conf, "}")...)
			show := func(prefix string) string {
				out, err := b.Birdc("show", "route", "all", prefix)
				if err != nil || !strings.Contains(out, prefix) {
					return ""
				}
				return out
			}
			return policyRouter{has: func(prefix string) bool { return show(prefix) != "" }, attrs: show}
		}
		return start(edge, "198.51.100.1", "64512", false), start(rr, "198.51.100.2", "64513", true)
	}, map[string][]string{
		"web":  {"BGP.as_path: 64513 64513 64513", "BGP.community: (64512,7) (64512,100)", "BGP.large_community: (4200000001, 1, 2)"},
		"dmz":  {"BGP.local_pref: 250"},
		"web2": {"BGP.community: (64512,8) (64512,100)"},
		"dmz2": {"BGP.local_pref: 300"},
	})
}

// testBGPPolicy builds the policy lab (one node, its FRR fed by the
// sidecar's Reconcile, two routers startRouters starts), allocates the
// three addresses and checks what each router holds against want, per
// pool, in that router's words.
func testBGPPolicy(t *testing.T, startRouters func(edge, rr *netlab.Host) (policyRouter, policyRouter), want map[string][]string) {
	lab.RequireFRR(t)
	lc := lab.Start(t, bgpPolicyYAML, []lab.NodeSpec{
		{Name: "a0", Addr: "198.51.100.21/24", Gateways: []string{"198.51.100.1"}},
	})
	edge, rr := startRouters(
		lc.AddRouter("edge", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}}),
		lc.AddRouter("rr", map[string][]string{netlab.DefaultSegment: {"198.51.100.2/24"}}))
	n := lc.Nodes[0]
	lab.StartFRR(t, n.Host, n.Target.Root)
	lc.AddServiceVIP("web", netip.MustParseAddr(policyWebCluster))
	lc.AddServiceVIP("dmz", netip.MustParseAddr(policyDMZ))
	lc.State.LocalServices = append(lc.State.LocalServices, cluster.LocalService{Name: "default/local", Pool: "web",
		VIPs: []netip.Addr{netip.MustParseAddr(policyWebLocal)}, Nodes: []string{"a0"}})
	lc.Apply(n)

	webLocal, dmz := policyWebLocal+"/32", policyDMZ+"/32"
	if !lab.WaitUntil(30*time.Second, func() bool { return edge.has(policyWebRoute) && edge.has(webLocal) && rr.has(dmz) }) {
		t.Fatalf("after 30s: edge holds %s %v, %s %v; rr holds %s %v", policyWebRoute, edge.has(policyWebRoute), webLocal, edge.has(webLocal), dmz, rr.has(dmz))
	}
	for _, prefix := range []string{policyWebRoute, webLocal} {
		got := edge.attrs(prefix)
		for _, w := range want["web"] {
			if !strings.Contains(got, w) {
				t.Errorf("edge's route %s lacks %q:\n%s", prefix, w, got)
			}
		}
	}
	if got := rr.attrs(dmz); !strings.Contains(got, want["dmz"][0]) {
		t.Errorf("rr's route %s lacks %q:\n%s", dmz, want["dmz"][0], got)
	}
	// What a pool's peers leave out never reaches the router; the
	// Cluster Service's own /32 is inside the aggregate.
	for _, p := range []string{dmz, policyWebCluster + "/32"} {
		if edge.has(p) {
			t.Errorf("edge holds %s:\n%s", p, edge.attrs(p))
		}
	}
	for _, p := range []string{policyWebRoute, webLocal} {
		if rr.has(p) {
			t.Errorf("rr holds %s:\n%s", p, rr.attrs(p))
		}
	}

	// A day-2 edit of the pools' policies (the ConfigMap's part, no
	// roll): a reload, and the routers see the new attributes on the
	// routes they hold, the sessions never reset.
	lc.Config.Spec.ServicePools[0].BGP.Communities = []string{"64512:8"}
	pref := uint32(300)
	lc.Config.Spec.ServicePools[1].BGP.LocalPref = &pref
	lc.Apply(n)
	if !lab.WaitUntil(20*time.Second, func() bool {
		return strings.Contains(edge.attrs(policyWebRoute), want["web2"][0]) && strings.Contains(rr.attrs(dmz), want["dmz2"][0])
	}) {
		t.Errorf("20s after the edit: edge's %s:\n%s\nrr's %s:\n%s", policyWebRoute, edge.attrs(policyWebRoute), dmz, rr.attrs(dmz))
	}
	for name, r := range map[string]policyRouter{"edge": edge, "rr": rr} {
		if r.neverReset != nil && !r.neverReset() {
			t.Errorf("%s's session with the node was reset by the policy edit", name)
		}
	}
}
