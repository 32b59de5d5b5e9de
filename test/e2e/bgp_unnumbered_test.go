package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpUnnumberedYAML: the nodes peer with their top-of-rack router over
// eth1, a point-to-point link without an address of its own (BGP
// unnumbered), and announce a dual-stack pool over that one session.
const bgpUnnumberedYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: unnumbered
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api:
    vips: [198.51.100.5]
  servicePools:
    - name: racks
      mode: bgp
      addresses: [203.0.113.224/28, "2001:db8:200::/124"]
  bgp:
    asn: 64513
    peers:
      - interface: eth1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        bfd: true
`

// TestBGPUnnumbered: two nodes, each with a link of its own (eth1, only
// IPv6 link-local addresses) to one router running real FRR, which
// peers with them as `neighbor eth-uN interface` (testBGPUnnumbered).
func TestBGPUnnumbered(t *testing.T) {
	testBGPUnnumbered(t, func(r *netlab.Host, nodes []*lab.Node) {
		conf := []string{"frr defaults traditional", "hostname tor", "log stdout informational",
			"router bgp 64512", " bgp router-id 203.0.113.65", " no bgp ebgp-requires-policy"}
		for i := range nodes {
			conf = append(conf, fmt.Sprintf(" neighbor eth-u%d interface remote-as 64513", i), fmt.Sprintf(" neighbor eth-u%d timers 1 3", i),
				fmt.Sprintf(" neighbor eth-u%d bfd", i))
		}
		conf = append(conf, " address-family ipv4 unicast", "  maximum-paths 8", " exit-address-family", " address-family ipv6 unicast")
		for i := range nodes {
			conf = append(conf, fmt.Sprintf("  neighbor eth-u%d activate", i))
		}
		conf = append(conf, "  maximum-paths 8", " exit-address-family", "exit")
		dir := lab.SharedDir(t, "vipctl-bgp-tor-")
		lab.WriteFRRConf(t, dir, conf...)
		lab.StartFRR(t, r, dir)
	})
}

// TestBGPUnnumberedBird: the same with BIRD 2 as the router: a protocol
// per node on its link (the node's link-local address, `interface`),
// IPv4 with extended next hop, and BIRD's radv advertising the router
// on the links, which is how the node's FRR finds it.
func TestBGPUnnumberedBird(t *testing.T) {
	lab.RequireBIRD(t)
	testBGPUnnumbered(t, func(r *netlab.Host, nodes []*lab.Node) {
		conf := []string{"log stderr all;", "router id 203.0.113.65;", "protocol device {}",
			"protocol kernel { ipv4 { export all; }; merge paths on; }",
			"protocol kernel { ipv6 { export all; }; merge paths on; }",
			`protocol radv { interface "eth-u*" { max ra interval 4; }; }`,
			`protocol bfd { interface "eth-u*" { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; }; }`,
			"template bgp nodes {",
			"  local as 64512;",
			"  bfd on;",
			"  hold time 3; keepalive time 1; connect retry time 1;",
			"  ipv4 { import all; export none; extended next hop on; };",
			"  ipv6 { import all; export none; };",
			"}"}
		for i, n := range nodes {
			conf = append(conf, fmt.Sprintf(`protocol bgp %s from nodes { neighbor %s%%'eth-u%d' as 64513; }`, birdName(n.Name), linkLocal(t, n.Host, "eth1"), i))
		}
		lab.StartBIRD(t, r, conf...)
	})
}

// testBGPUnnumbered: each node's session comes up (the sidecar's reader
// names it eth1; BFD up), the router installs the pool's IPv4 address with the
// nodes' IPv6 link-local next hops (RFC 8950) and its IPv6 address
// likewise, one hop per node, and a client behind the router reaches
// both over them. A host on a node's link hears the router's
// advertisements and takes the router, never the node, for its default
// router (the node advertises a lifetime of 0). startRouter starts the
// router's daemon on r, with eth-uN the link to node N.
func testBGPUnnumbered(t *testing.T, startRouter func(r *netlab.Host, nodes []*lab.Node)) {
	lab.RequireFRR(t)
	lc := lab.Start(t, bgpUnnumberedYAML, []lab.NodeSpec{
		{Name: "n0", Addr: "198.51.100.21/24"},
		{Name: "n1", Addr: "198.51.100.22/24"},
	})
	links := map[string][]string{"c": {"203.0.113.65/26", "2001:db8:c::1/64"}}
	lc.AddSegment("c")
	for i, n := range lc.Nodes {
		lc.AddLink(n, fmt.Sprintf("u%d", i), "eth1")
		links[fmt.Sprintf("u%d", i)] = nil
	}
	r := lc.AddRouter("tor", links)
	r.MustExec("sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1")
	startRouter(r, lc.Nodes)
	bl := &bgpLab{lc: lc, routerHost: r, client: dualStackClient(lc)}
	watcher := lc.AddHost("watcher", netlab.HostOpts{Iface: "eth0", Segment: "u0"})
	var nodeFRR []*lab.FRR
	for i, n := range lc.Nodes {
		nodeFRR = append(nodeFRR, startBGPNode(t, n, vip4, vip6))
		// The way back to the client: IPv4 through the router's
		// link-local address, as the router reaches the node.
		ll := linkLocal(t, r, fmt.Sprintf("eth-u%d", i))
		n.Host.MustExec("ip", "route", "add", "203.0.113.64/26", "via", "inet6", ll, "dev", "eth1")
		n.Host.MustExec("ip", "-6", "route", "add", "2001:db8:c::/64", "via", ll, "dev", "eth1")
		lc.Apply(n)
		b, err := os.ReadFile(n.Target.Path(onnode.FRRConfPath))
		if err != nil || !strings.Contains(string(b), "\n neighbor eth1 interface remote-as 64512\n") {
			t.Fatalf("%s's frr.conf has no unnumbered session on eth1 (err %v):\n%s", n.Name, err, b)
		}
	}

	for _, n := range lc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s unnumbered session on eth1 Established with both prefixes sent", func() bool {
			peers, ok, err := frr.ReadSessions(context.Background(), n.Target)
			return err == nil && ok && len(peers) == 1 && peers[0].Peer == "eth1" &&
				peers[0].State == v1alpha1.BGPStateEstablished && peers[0].PrefixesSent == 2 && peers[0].BFD == "Up"
		})
	}
	for _, vip := range []string{vip4, vip6} {
		for _, h := range bl.routedToEveryNode(t, vip) {
			if a := netip.MustParseAddr(h); !a.Is6() || !a.IsLinkLocalUnicast() {
				t.Errorf("the router's next hop to %s is %s, want a node's IPv6 link-local address", vip, h)
			}
		}
	}

	routerLL := linkLocal(t, r, "eth-u0")
	nodeLL := linkLocal(t, lc.Nodes[0].Host, "eth1")
	var defaults string
	if !lab.WaitUntil(40*time.Second, func() bool {
		out, _ := watcher.Exec("ip", "-6", "route", "show", "default")
		defaults = string(out)
		return strings.Contains(defaults, routerLL)
	}) {
		t.Fatalf("the host on n0's link learnt no default route from the router's advertisements: %q", defaults)
	}
	// Both advertise every 10 s at most (bgpd's interval): one more
	// round of the node's after the router's was heard.
	time.Sleep(11 * time.Second)
	out, _ := watcher.Exec("ip", "-6", "route", "show", "default")
	if strings.Contains(string(out), nodeLL) {
		t.Errorf("the host on n0's link took the node (%s) for a default router: %s", nodeLL, out)
	}
	if ra, err := nodeFRR[0].Vtysh("show interface eth1"); err == nil {
		t.Logf("n0's eth1 as zebra sees it:\n%s", ra)
	}

	// n1's link goes dead (its NIC down: nothing more reaches the
	// router, whose own port stays up): BFD withdraws n1's route.
	gone, lastFail, failed := bl.loseNode(t, vip4, func() { lc.Nodes[1].Host.MustExec("ip", "link", "set", "eth1", "down") }, []string{nodeLL})
	t.Logf("n1's link down: its route withdrawn %s after, the last of %d failed dials at %s",
		gone.Round(time.Millisecond), failed, lastFail.Round(time.Millisecond))
}

// linkLocal is h's IPv6 link-local address on iface.
func linkLocal(t testing.TB, h *netlab.Host, iface string) string {
	t.Helper()
	var ll string
	lab.WaitFor(t, 10*time.Second, h.Name+"'s link-local address on "+iface, func() bool {
		out, err := h.Exec("ip", "-6", "-br", "addr", "show", "dev", iface, "scope", "link")
		for _, f := range strings.Fields(string(out)) {
			if p, perr := netip.ParsePrefix(f); err == nil && perr == nil && p.Addr().IsLinkLocalUnicast() {
				ll = p.Addr().String()
				return !strings.Contains(string(out), "tentative")
			}
		}
		return false
	})
	return ll
}
