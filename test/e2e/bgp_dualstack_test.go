package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpDualStackYAML: dual-stack nodes announce a dual-stack pool to a
// router they reach over one family alone (PEER), whose session carries
// the other family's routes too (dualStack).
const bgpDualStackYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: onesession
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:a::/64"]
  api:
    vips: [198.51.100.5]
  servicePools:
    - name: racks
      mode: bgp
      addresses: [203.0.113.224/28, "2001:db8:200::/124"]
  bgp:
    asn: 64513
    peers:
      - address: "PEER"
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        dualStack: true
`

// TestBGPDualStackSessions: a pool's IPv6 routes over an IPv4 session
// (their next hop the node's IPv6 address) and its IPv4 routes over an
// IPv6 session (an IPv6 next hop, RFC 8950), each with real FRR as the
// router peering over that one family: every node's session comes up,
// the router installs both of the pool's addresses with one next hop per
// node, and a client behind the router reaches both.
func TestBGPDualStackSessions(t *testing.T) {
	lab.RequireFRR(t)
	for _, tc := range []struct {
		name, peer, listen string
		extra              []string
	}{
		{"ipv6-over-ipv4", "198.51.100.1", "198.51.100.0/24", nil},
		{"ipv4-over-ipv6", "2001:db8:a::1", "2001:db8:a::/64", []string{" neighbor nodes capability extended-nexthop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := append([]string{"frr defaults traditional", "hostname upstream", "log stdout informational",
				"router bgp 64512", " bgp router-id 198.51.100.1", " no bgp ebgp-requires-policy",
				" neighbor nodes peer-group", " neighbor nodes remote-as 64513", " neighbor nodes timers 1 3"}, tc.extra...)
			conf = append(conf, " bgp listen range "+tc.listen+" peer-group nodes",
				" address-family ipv4 unicast", "  neighbor nodes activate", "  maximum-paths 8", " exit-address-family",
				" address-family ipv6 unicast", "  neighbor nodes activate", "  maximum-paths 8", " exit-address-family", "exit")
			testBGPOneSession(t, strings.Replace(bgpDualStackYAML, "PEER", tc.peer, 1), tc.peer, func(r *netlab.Host, _ []*lab.Node) {
				dir := lab.SharedDir(t, "vipctl-bgp-onesession-")
				lab.WriteFRRConf(t, dir, conf...)
				lab.StartFRR(t, r, dir)
			})
		})
	}
}

// TestBGPDualStackSessionsBird: the same with BIRD 2 as the router, a
// protocol per node over the one family with both channels (`extended
// next hop` on the IPv4 channel of an IPv6 session).
func TestBGPDualStackSessionsBird(t *testing.T) {
	lab.RequireFRR(t)
	lab.RequireBIRD(t)
	for _, tc := range []struct{ name, peer, v4channel string }{
		{"ipv6-over-ipv4", "198.51.100.1", "ipv4 { import all; export none; };"},
		{"ipv4-over-ipv6", "2001:db8:a::1", "ipv4 { import all; export none; extended next hop on; };"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testBGPOneSession(t, strings.Replace(bgpDualStackYAML, "PEER", tc.peer, 1), tc.peer, func(r *netlab.Host, nodes []*lab.Node) {
				conf := []string{"log stderr all;", "router id 198.51.100.1;", "protocol device {}",
					"protocol kernel { ipv4 { export all; }; merge paths on; }",
					"protocol kernel { ipv6 { export all; }; merge paths on; }",
					"template bgp nodes {",
					"  local " + tc.peer + " as 64512;",
					"  hold time 3; keepalive time 1; connect retry time 1;",
					"  " + tc.v4channel,
					"  ipv6 { import all; export none; };",
					"}"}
				for i, n := range nodes {
					addr := n.Addr
					if strings.Contains(tc.peer, ":") {
						addr = fmt.Sprintf("2001:db8:a::%d", 21+i) // testBGPOneSession's
					}
					conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+addr+" as 64513; }")
				}
				lab.StartBIRD(t, r, conf...)
			})
		})
	}
}

// testBGPOneSession runs the lab of TestBGPDualStackSessions, the
// router's daemon started by startRouter; peer is the router's address
// the nodes peer with.
func testBGPOneSession(t *testing.T, yaml, peer string, startRouter func(r *netlab.Host, nodes []*lab.Node)) {
	lc := lab.Start(t, yaml, dualStackNodes())
	lc.AddSegment("c")
	r := lc.AddRouter("upstream", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24", "2001:db8:a::1/64"},
		"c": {"203.0.113.65/26", "2001:db8:c::1/64"}})
	r.MustExec("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1")
	startRouter(r, lc.Nodes)
	bl := &bgpLab{lc: lc, routerHost: r, client: dualStackClient(lc)}
	for _, n := range lc.Nodes {
		startBGPNode(t, n, vip4, vip6)
		lc.Apply(n)
		b, err := os.ReadFile(n.Target.Path(onnode.FRRConfPath))
		if err != nil || strings.Count(string(b), "\n  neighbor "+peer+" activate\n") != 2 {
			t.Fatalf("%s's frr.conf does not activate %s in both families (err %v):\n%s", n.Name, peer, err, b)
		}
	}
	for _, vip := range []string{vip4, vip6} {
		bl.routedToEveryNode(t, vip)
	}
}

// vip4 and vip6 are the dual-stack pool's Service addresses in the labs
// of dualStackClient.
const vip4, vip6 = "203.0.113.225", "2001:db8:200::a"

// dualStackNodes are three dual-stack nodes whose gateways are the
// router's 198.51.100.1 and 2001:db8:a::1.
func dualStackNodes() []lab.NodeSpec {
	var specs []lab.NodeSpec
	for i, name := range []string{"n0", "n1", "n2"} {
		specs = append(specs, lab.NodeSpec{Name: name, Addr: fmt.Sprintf("198.51.100.%d/24", 21+i),
			Addr6: fmt.Sprintf("2001:db8:a::%d/64", 21+i), Gateways: []string{"198.51.100.1", "2001:db8:a::1"}})
	}
	return specs
}

// dualStackClient adds the client on segment "c" behind the router
// (203.0.113.65, 2001:db8:c::1) and gives pool "racks" vip4 and vip6.
func dualStackClient(lc *lab.Cluster) *netlab.Host {
	client := lc.AddHost("outside", netlab.HostOpts{Iface: "eth0", Addrs: []string{"203.0.113.70/26", "2001:db8:c::70/64"},
		Segment: "c", Gateways: []string{"203.0.113.65", "2001:db8:c::1"}})
	lc.AddServiceVIP("racks", netip.MustParseAddr(vip4))
	lc.AddServiceVIP("racks", netip.MustParseAddr(vip6))
	return client
}

// routedToEveryNode waits for the router's route to vip to have a next
// hop per node and has the client's 30 connections to it all answered
// by nodes; it returns the next hops.
func (bl *bgpLab) routedToEveryNode(t *testing.T, vip string) []string {
	t.Helper()
	var hops []string
	if !lab.WaitUntil(30*time.Second, func() bool { hops = bl.nextHops(vip); return len(hops) == len(bl.lc.Nodes) }) {
		out, _ := bl.routerHost.Exec("ip", "route", "show", "table", "all")
		t.Fatalf("the router's route to %s has next hops %v, want one per node; its routes:\n%s", vip, hops, out)
	}
	got := bl.ask(t, vip, 30)
	t.Logf("%s: next hops %v; answers %v", vip, hops, got)
	answered := 0
	for _, n := range bl.lc.Nodes {
		answered += got[n.Name]
	}
	if answered != 30 {
		t.Errorf("%s: want all 30 answered by the nodes; got %v", vip, got)
	}
	return hops
}
