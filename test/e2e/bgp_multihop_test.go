package e2e

import (
	"context"
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

// bgpMultihopYAML peers the nodes with a router one routed hop away.
var bgpMultihopYAML = strings.NewReplacer(
	"      - address: 198.51.100.1\n", "      - address: 203.0.113.66\n",
	"        keepaliveTime: 1s\n", "        keepaliveTime: 1s\n        ebgpMultihop: 2\n",
).Replace(bgpUpdateYAML)

// TestBGPMultihop: with ebgpMultihop the nodes' sessions reach a router
// that is not on their subnet (a plain router between, which decrements
// the TTL), FRR as that router.
func TestBGPMultihop(t *testing.T) {
	testBGPMultihop(t, func(r *netlab.Host, _ []*lab.Node) func(string) bool {
		conf := strings.Split(strings.NewReplacer(
			" bgp router-id 198.51.100.1", " bgp router-id 203.0.113.66",
			" neighbor nodes timers 1 3", " neighbor nodes timers 1 3\n neighbor nodes ebgp-multihop 2",
		).Replace(strings.Join(upstreamFRR, "\n")), "\n")
		dir := lab.SharedDir(t, "vipctl-bgp-router-")
		lab.WriteFRRConf(t, dir, conf...)
		f := lab.StartFRR(t, r, dir)
		return func(node string) bool {
			out, err := f.Vtysh("show bgp neighbors " + node + " json")
			return err == nil && strings.Contains(out, `"bgpState":"Established"`)
		}
	})
}

// TestBGPMultihopBird: the same with BIRD 2 as the far router (`multihop
// 2` on its protocols).
func TestBGPMultihopBird(t *testing.T) {
	testBGPMultihop(t, func(r *netlab.Host, nodes []*lab.Node) func(string) bool {
		conf := []string{
			"log stderr all;",
			"router id 203.0.113.66;",
			"protocol device {}",
			"template bgp nodes {",
			"  local 203.0.113.66 as 64512;",
			"  multihop 2;",
			"  hold time 3; keepalive time 1; connect retry time 1;",
			"  ipv4 { import all; export none; };",
			"}",
		}
		names := map[string]string{}
		for _, n := range nodes {
			names[n.Addr] = birdName(n.Name)
			conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+n.Addr+" as 64513; }")
		}
		b := lab.StartBIRD(t, r, conf...)
		return func(node string) bool { return b.Established(names[node]) }
	})
}

// testBGPMultihop: nodes on 198.51.100.0/24 behind a plain router ("hop",
// their gateway) and the BGP router ("upstream", 203.0.113.66) on another
// subnet behind it. The nodes' frr.conf, from their own Reconcile, has
// the TTL; every node's session comes up, on the node's side and on the
// router's (established, asked with the node's address). startRouter
// starts the router's daemon and returns that question.
func testBGPMultihop(t *testing.T, startRouter func(r *netlab.Host, nodes []*lab.Node) func(string) bool) {
	lab.RequireFRR(t)
	gw := []string{"198.51.100.1"}
	lc := lab.Start(t, bgpMultihopYAML, []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true, Gateways: gw},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}, Gateways: gw},
	})
	lc.AddSegment("m")
	lc.AddRouter("hop", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "m": {"203.0.113.65/26"}})
	r := lc.AddRouter("upstream", map[string][]string{"m": {"203.0.113.66/26"}})
	r.MustExec("ip", "route", "add", "198.51.100.0/24", "via", "203.0.113.65")
	established := startRouter(r, lc.Nodes)
	ctx := context.Background()
	for _, n := range lc.Nodes {
		lab.StartFRR(t, n.Host, n.Target.Root)
		lc.Apply(n)
		conf, err := os.ReadFile(n.Target.Path(onnode.FRRConfPath))
		if err != nil || !strings.Contains(string(conf), " neighbor 203.0.113.66 ebgp-multihop 2\n") {
			t.Fatalf("%s's frr.conf lacks the TTL (err %v):\n%s", n.Name, err, conf)
		}
	}
	for _, n := range lc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s session to the router a hop away Established", func() bool {
			peers, ok, err := frr.ReadSessions(ctx, n.Target)
			return err == nil && ok && len(peers) == 1 && peers[0].State == v1alpha1.BGPStateEstablished && established(n.Addr)
		})
	}
}
