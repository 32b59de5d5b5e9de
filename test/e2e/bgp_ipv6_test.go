package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpIPv6YAML: three dual-stack nodes on one segment announce an IPv6
// pool to the router's IPv6 address (an IPv6 prefix needs an IPv6
// session), and peer over IPv4 too, as a dual-stack cluster would.
const bgpIPv6YAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: bgplab6
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:a::/64"]
  api:
    vips: [198.51.100.5]
  servicePools:
    - name: six
      mode: bgp
      addresses: ["2001:db8:200::/124"]
  bgp:
    asn: 64513
    peers:
      - address: 198.51.100.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
      - address: "2001:db8:a::1"
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
`

// upstreamFRR6 is the router's side for it: dynamic neighbours from both
// families' node subnets, IPv6 unicast activated for the IPv6 ones.
var upstreamFRR6 = []string{
	"frr defaults traditional",
	"hostname upstream",
	"log stdout informational",
	"router bgp 64512",
	" bgp router-id 198.51.100.1",
	" no bgp ebgp-requires-policy",
	" neighbor nodes peer-group",
	" neighbor nodes remote-as 64513",
	" neighbor nodes timers 1 3",
	" neighbor nodes6 peer-group",
	" neighbor nodes6 remote-as 64513",
	" neighbor nodes6 timers 1 3",
	" bgp listen range 198.51.100.0/24 peer-group nodes",
	" bgp listen range 2001:db8:a::/64 peer-group nodes6",
	" address-family ipv4 unicast",
	"  maximum-paths 8",
	" exit-address-family",
	" address-family ipv6 unicast",
	"  neighbor nodes6 activate",
	"  maximum-paths 8",
	" exit-address-family",
	"exit",
}

// TestBGPIPv6Sessions: IPv6 end to end. Every node's bgpd brings up its
// IPv6 session (read by the sidecar's session reader: peer, state, the
// one prefix sent), the router installs the pool's /128 with one next
// hop per node, a client behind the router on another IPv6 subnet is
// answered through it, and removing the address from the pool withdraws
// the route.
func TestBGPIPv6Sessions(t *testing.T) {
	lab.RequireFRR(t)
	lc := lab.Start(t, bgpIPv6YAML, dualStackNodes())
	lc.AddSegment("c")
	r := lc.AddRouter("upstream", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24", "2001:db8:a::1/64"}, "c": {"2001:db8:c::1/64"}})
	r.MustExec("sysctl", "-qw", "net.ipv6.fib_multipath_hash_policy=1")
	dir := lab.SharedDir(t, "vipctl-bgp6-router-")
	lab.WriteFRRConf(t, dir, upstreamFRR6...)
	router := lab.StartFRR(t, r, dir)
	client := lc.AddHost("outside", netlab.HostOpts{Iface: "eth0", Addrs: []string{"2001:db8:c::70/64"}, Segment: "c", Gateways: []string{"2001:db8:c::1"}})
	const vip = "2001:db8:200::a"
	lc.AddServiceVIP("six", netip.MustParseAddr(vip))
	for _, n := range lc.Nodes {
		startBGPNode(t, n, vip)
		lc.Apply(n)
	}

	for _, n := range lc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s IPv6 session Established with its prefix sent", func() bool {
			peers, ok, err := frr.ReadSessions(context.Background(), n.Target)
			if err != nil || !ok {
				return false
			}
			for _, p := range peers {
				if p.Peer == "2001:db8:a::1" && p.State == v1alpha1.BGPStateEstablished && p.PrefixesSent == 1 {
					return true
				}
			}
			return false
		})
	}
	bl := &bgpLab{lc: lc, router: router, routerHost: router.Host, client: client}
	hops := func() []string { return bl.nextHops(vip) }
	if !lab.WaitUntil(30*time.Second, func() bool { return len(hops()) == 3 }) {
		out, _ := router.Vtysh("show bgp ipv6 unicast")
		t.Fatalf("the router's route to %s has next hops %v, want one per node:\n%s", vip, hops(), out)
	}
	t.Logf("the router's next hops to %s: %v", vip, hops())
	got := bl.ask(t, vip, 30)
	t.Logf("answers over IPv6: %v", got)
	if got["n0"]+got["n1"]+got["n2"] != 30 || len(got) < 2 {
		t.Errorf("want all 30 answered by the nodes, spread by ECMP; got %v", got)
	}

	lc.RemoveServiceVIPs("six", netip.MustParseAddr(vip))
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	if !lab.WaitUntil(20*time.Second, func() bool { return len(hops()) == 0 }) {
		t.Errorf("the route to %s is still there after the address left the pool: %v", vip, hops())
	}
}
