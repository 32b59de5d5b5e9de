package e2e

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpGRSpecs are the two-rack lab's nodes (startBGPLab's).
func bgpGRSpecs() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "a0", Addr: "198.51.100.21/24", Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "b0", Addr: "203.0.113.21/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
		{Name: "b1", Addr: "203.0.113.22/26", Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
	}
}

var bgpGRRouterAddrs = map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "b": {"203.0.113.1/26"}}

// bgpGRYAML is the two-rack lab with graceful restart on both peers, and
// BFD when bfd.
func bgpGRYAML(bfd bool) string {
	extra := "keepaliveTime: 1s\n        gracefulRestart: true\n"
	if bfd {
		extra += "        bfd: true\n"
	}
	return strings.ReplaceAll(bgpLabYAML, "keepaliveTime: 1s\n", extra)
}

// TestBGPGracefulRestart: FRR as the router, graceful restart and BFD on
// both sides. The node's whole FRR
// (zebra, bfdd, bgpd) stops and starts again, as when its container
// restarts, while a client opens a connection every 10 ms to a Local
// Service's address that node alone announces: the router keeps the
// route (stale) meanwhile and not one connection fails. A node that then
// dies without a word is still withdrawn at BFD speed, not kept for the
// restart time: b0 itself, its BFD session up again with its FRR.
func TestBGPGracefulRestart(t *testing.T) {
	lab.RequireFRR(t)
	router := withRouterBFD(slices.Clone(upstreamFRR))
	router = slices.Insert(router, slices.Index(router, " bgp router-id 198.51.100.1")+1, " bgp graceful-restart")
	t.Run("off", func(t *testing.T) {
		// The same lab without gracefulRestart: the restart withdraws
		// the route and connections fail, which the test must see.
		yaml := strings.ReplaceAll(bgpLabYAML, "keepaliveTime: 1s\n", "keepaliveTime: 1s\n        bfd: true\n")
		bl := newBGPLab(t, lab.Start(t, yaml, bgpGRSpecs()), bgpGRRouterAddrs, router)
		failed, sawStale := bl.restartFRRWhilePolled(t, "b0", func(vip string) bool {
			out, _ := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32")
			return strings.Contains(out, "(stale)")
		})
		t.Logf("without graceful restart: %d connections failed, stale: %v", failed, sawStale)
		if failed == 0 || sawStale {
			t.Errorf("without graceful restart %d connections failed, stale %v: want some failed, never stale", failed, sawStale)
		}
	})
	t.Run("on", func(t *testing.T) { testBGPGracefulRestart(t, router) })
}

func testBGPGracefulRestart(t *testing.T, router []string) {
	bl := newBGPLab(t, lab.Start(t, bgpGRYAML(true), bgpGRSpecs()), bgpGRRouterAddrs, router)
	all := bl.announceEverywhere(t, bgpClusterVIP)
	bl.waitBFDUp(t, 3)
	stale := func(vip string) bool {
		out, _ := bl.router.Vtysh("show bgp ipv4 unicast " + vip + "/32")
		return strings.Contains(out, "(stale)")
	}
	failed, sawStale := bl.restartFRRWhilePolled(t, "b0", stale)
	t.Logf("b0's FRR restarted: %d connections failed, the router held the route stale: %v", failed, sawStale)
	if failed != 0 || !sawStale {
		t.Errorf("through b0's FRR restart %d connections failed and the route was stale: %v; want 0 and true", failed, sawStale)
	}
	// b0's BFD session comes back with its FRR, within seconds: bgpd
	// reaches the new zebra at once (frr.PrepareRun clears the last
	// run's sockets; zebra's old one had bgpd fail and retry about 8 s
	// later) and gets its BFD peers once it has (frr.LoadConfig; FRR
	// 8.4.4 lost those it read before, and the session stayed down). It
	// is what detects b0's own loss below.
	restarted := time.Now()
	bfdUp := func(addr string) bool {
		out, _ := bl.router.Vtysh("show bfd peers brief")
		return slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return strings.Contains(l, " "+addr+" ") && strings.Contains(l, " up ")
		})
	}
	if !lab.WaitUntil(3*time.Second, func() bool { return bfdUp("203.0.113.21") && bfdUp("203.0.113.22") }) {
		bfd, _ := bl.router.Vtysh("show bfd peers brief")
		t.Fatalf("the router's BFD sessions with b0 and b1 are not both up 3 s after b0's route was fresh again:\n%s\n--- b0's bgpd:\n%s", bfd, bl.frr["b0"].Bgpd.LogTail(20))
	}
	t.Logf("the router's BFD session with b0 up %s after its route was fresh again", time.Since(restarted).Round(10*time.Millisecond))
	gone, lastFail, _ := bl.loseNode(t, bgpClusterVIP, bl.lc.ByName["b0"].Host.LinkDown, []string{all[0], all[2]})
	t.Logf("b0, its FRR restarted, lost: withdrawn %s after its link went; last failed connection at %s", gone.Round(time.Millisecond), lastFail.Round(time.Millisecond))
	if gone > 2500*time.Millisecond {
		t.Errorf("a dead node with graceful restart withdrawn after %s, want within BFD's 2.5s", gone)
	}
}

// TestBGPGracefulRestartBird: BIRD 2 as the router (`graceful restart
// on`, no BFD): the node's FRR restarts while the client polls, BIRD
// keeps the route (its `show route` marks it stale) and no connection
// fails.
func TestBGPGracefulRestartBird(t *testing.T) {
	lab.RequireFRR(t)
	bl := newBGPLab(t, lab.Start(t, bgpGRYAML(false), bgpGRSpecs()), bgpGRRouterAddrs, nil)
	conf := []string{
		"log stderr all;", "router id 198.51.100.1;", "protocol device {}",
		"protocol kernel { ipv4 { export where source = RTS_BGP; }; merge paths on; }",
		"template bgp nodes {",
		"  local as 64512;",
		"  hold time 3; keepalive time 1; connect retry time 1;",
		"  graceful restart on;",
		"  ipv4 { import all; export none; };",
		"}",
	}
	for _, n := range bl.lc.Nodes {
		addr, _, _ := strings.Cut(n.Addr, "/")
		conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+addr+" as 64513; }")
	}
	b := lab.StartBIRD(t, bl.routerHost, conf...)
	// BIRD does not mark a route stale in `show route`: held while the
	// node's session is down is stale.
	stale := func(vip string) bool {
		return !b.Established(birdName("b0")) && len(bl.nextHops(vip)) > 0
	}
	failed, sawStale := bl.restartFRRWhilePolled(t, "b0", stale)
	t.Logf("b0's FRR restarted: %d connections failed, BIRD held the route stale: %v", failed, sawStale)
	if failed != 0 || !sawStale {
		out, _ := b.Birdc("show", "protocols", "all", birdName("b0"))
		t.Errorf("through b0's FRR restart %d connections failed and the route was stale: %v; want 0 and true\n%s", failed, sawStale, out)
	}
}

// restartFRRWhilePolled gives a Local Service's address to node alone,
// waits for the router's route, then stops node's FRR (every daemon, as
// its container stops), starts it again 3 s later and waits until the
// route is no longer stale, while the client opens a connection to the
// address every 10 ms (200 ms timeout). It returns how many failed and
// whether the router held the route stale meanwhile.
func (bl *bgpLab) restartFRRWhilePolled(t *testing.T, node string, stale func(string) bool) (int, bool) {
	t.Helper()
	const vip = bgpLocalVIP
	for _, n := range bl.lc.Nodes {
		onLo(t, n.Host, vip)
	}
	bl.setLocal(t, []string{node}, nil)
	n := bl.lc.ByName[node]
	hop, _, _ := strings.Cut(n.Addr, "/")
	bl.waitHops(t, vip, []string{hop}, 20*time.Second)
	var failed atomic.Int64
	polling, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for polling.Err() == nil {
			ctx, cancel := context.WithTimeout(polling, 200*time.Millisecond)
			c, err := bl.client.DialContext(ctx, "tcp", vip+":8080")
			cancel()
			if err != nil && polling.Err() == nil {
				failed.Add(1)
			} else if err == nil {
				_ = c.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	bl.frr[node].Stop()
	sawStale := lab.WaitUntil(3*time.Second, func() bool { return stale(vip) })
	time.Sleep(3 * time.Second)
	bl.frr[node] = lab.StartFRR(t, n.Host, n.Target.Root)
	back := lab.WaitUntil(30*time.Second, func() bool { return !stale(vip) && slices.Equal(bl.nextHops(vip), []string{hop}) })
	time.Sleep(time.Second)
	stop()
	<-done
	if !back {
		t.Fatalf("%s's route not back (fresh, next hop %s) 30s after its FRR restarted: next hops %v", node, hop, bl.nextHops(vip))
	}
	return int(failed.Load()), sawStale
}
