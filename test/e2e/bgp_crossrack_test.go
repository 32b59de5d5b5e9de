package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpCrossRackYAML: control-plane nodes in two racks, no segment in
// common, one API VIP outside both racks' subnets, announced over BGP
// by whichever node holds it (spec.api.routed), VRRP unicast across the
// router electing that node. PROFILE is the VRRP profile.
const bgpCrossRackYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: crossrack
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, 203.0.113.0/26]
  api:
    vips: [203.0.113.150]
    routed: true
  ingress:
    - name: default
      vips: [203.0.113.151]
      routed: true
  vrrp: {profile: PROFILE, mode: unicast}
  bgp:
    asn: 64513
    peers:
      - address: 198.51.100.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        bfd: true
        nodeSelector: {rack: a}
      - address: 203.0.113.1
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
        bfd: true
        nodeSelector: {rack: b}
`

// crossRackVIP and crossRackIngressVIP are bgpCrossRackYAML's API and
// ingress VIPs.
const crossRackVIP, crossRackIngressVIP = "203.0.113.150", "203.0.113.151"

// TestBGPCrossRackAPIVIP: masters m-a0, m-a1 in rack a and m-b0 in rack
// b, joined only by a router running real FRR, each with its haproxy and
// a kube-apiserver stand-in. Once settled, the router learns the API VIP
// from exactly one node, the VRRP holder, and a client behind it is
// answered through it. The holder vanishes (its switch port gone, no
// word sent): another master takes the VIP over VRRP across the router
// and announces it, the lost holder's route goes (BFD, or the hold timer
// without it), and the router ends with exactly one next hop, the new
// holder. For each case (VRRP profile, BFD or not) the test logs when
// the new holder's route came, how long the router had two next hops
// (the new holder's beside the lost one's, until the loss is detected)
// or none, and the client's failed requests (docs/bgp.md, "The API VIP
// across racks").
//
// `make test` runs the fast profile with BFD, the design's case;
// VIPCTL_CROSSRACK_CASES=all adds the default profile and the hold timer
// (docs/bgp.md's table).
func TestBGPCrossRackAPIVIP(t *testing.T) {
	type crossRackCase struct {
		profile string
		bfd     bool
	}
	cases := []crossRackCase{{"fast", true}}
	if os.Getenv("VIPCTL_CROSSRACK_CASES") == "all" {
		cases = append(cases, crossRackCase{"default", true}, crossRackCase{"fast", false})
	}
	for _, tc := range cases {
		name := tc.profile + map[bool]string{true: "-bfd", false: "-hold"}[tc.bfd]
		t.Run(name, func(t *testing.T) { testCrossRackAPIVIP(t, tc.profile, tc.bfd, false) })
	}
}

// TestBGPCrossRackAPIVIPBird: the same, fast profile with BFD, against
// BIRD 2 (Debian's bird2) as the racks' router, one protocol per master
// with BFD on, ECMP into its kernel table: the API and ingress VIPs'
// routes from their holders alone, and the moves, are understood by
// another implementation than the nodes' own FRR.
func TestBGPCrossRackAPIVIPBird(t *testing.T) {
	testCrossRackAPIVIP(t, "fast", true, true)
}

// crossRackBIRD is BIRD's configuration as the cross-rack lab's router:
// both racks' masters as eBGP peers with BFD, their routes into the
// kernel, equal ones merged (ECMP). error wait time 1: the nodes' bgpd
// moves each BFD session once right after the BGP session comes up,
// which BIRD sees go down, and by default BIRD then keeps the session
// down for 60 s (docs/bgp.md, "A router's side of BFD").
func crossRackBIRD(nodes []*lab.Node) []string {
	conf := []string{
		"log stderr all;", "router id 198.51.100.1;", "protocol device {}",
		"protocol kernel { ipv4 { export where source = RTS_BGP; }; merge paths on; }",
		`protocol bfd { interface "*" { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; }; }`,
		"template bgp nodes {",
		"  local as 64512;",
		"  hold time 3; keepalive time 1; connect retry time 1;",
		"  bfd on;",
		"  error wait time 1, 300;",
		"  ipv4 { import all; export none; };",
		"}",
	}
	for _, n := range nodes {
		addr, _, _ := strings.Cut(n.Addr, "/")
		conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+addr+" as 64513; }")
	}
	return conf
}

// testCrossRackAPIVIP runs TestBGPCrossRackAPIVIP's case with FRR as the
// router, or with BIRD when bird is set (BFD on).
func testCrossRackAPIVIP(t *testing.T, profile string, bfd, bird bool) {
	lab.RequireFRR(t)
	specs := []lab.NodeSpec{
		{Name: "m-a0", Addr: "198.51.100.21/24", ControlPlane: true, Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "m-a1", Addr: "198.51.100.22/24", ControlPlane: true, Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "m-b0", Addr: "203.0.113.21/26", ControlPlane: true, Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
	}
	yaml, router := strings.Replace(bgpCrossRackYAML, "PROFILE", profile, 1), withRouterBFD(upstreamFRR)
	if !bfd {
		yaml, router = strings.ReplaceAll(yaml, "        bfd: true\n", ""), upstreamFRR
	}
	if bird {
		router = nil
	}
	lc := lab.Start(t, yaml, specs)
	bl := newBGPLab(t, lc, map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "b": {"203.0.113.1/26"}}, router)
	var b *lab.BIRD
	if bird {
		b = lab.StartBIRD(t, bl.routerHost, crossRackBIRD(lc.Nodes)...)
	}
	// The default IngressController's routers run on m-a1 and m-b0.
	routers := []string{"m-a1", "m-b0"}
	for _, n := range lc.Nodes {
		here := slices.Contains(routers, n.Name)
		if here {
			n.StartRouter(t, "default", 1936, crossRackIngressVIP)
		}
		if err := runtimecfg.SetIngressReady(n.Target, "default", here); err != nil {
			t.Fatal(err)
		}
	}
	bl.applyAll(t)
	addrOf := map[string]string{}
	for _, n := range lc.Nodes {
		addrOf[strings.Split(n.Addr, "/")[0]] = n.Name
	}
	routerTable := func() string {
		if b != nil {
			out, _ := b.Birdc("show", "route", "all")
			sessions, _ := b.Birdc("show", "protocols")
			bfd, _ := b.Birdc("show", "bfd", "sessions")
			sessions += bfd
			return sessions + out
		}
		out, _ := bl.router.Vtysh("show bgp ipv4 unicast")
		return out
	}
	if profile == "fast" && bfd {
		crossRackIngressMove(t, bl, addrOf, routers, routerTable)
	}
	hops := settledHop(t, bl, crossRackVIP, "the API VIP", routerTable)
	holder := addrOf[hops[0]]
	p := lab.PollFrom(bl.client, "https://"+crossRackVIP+":6443/", 20*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the routed API VIP", func() bool { ok, _ := p.Counts(); return ok > 10 })

	// Sample the route every 10 ms from the fault on.
	var two, none time.Duration
	var seen []string
	sampling, sampled := make(chan struct{}), make(chan struct{})
	down := time.Now()
	go func() {
		defer close(sampled)
		last, at := hops, down
		for {
			h := bl.nextHops(crossRackVIP)
			now := time.Now()
			switch len(last) {
			case 0:
				none += now.Sub(at)
			case 2:
				two += now.Sub(at)
			}
			if !slices.Equal(h, last) {
				seen = append(seen, fmt.Sprintf("%v@%s", h, now.Sub(down).Round(time.Millisecond)))
			}
			last, at = h, now
			select {
			case <-sampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	lc.ByName[holder].Host.LinkDown()
	var next []string
	if !lab.WaitUntil(20*time.Second, func() bool {
		next = bl.nextHops(crossRackVIP)
		return len(next) == 1 && next[0] != hops[0]
	}) {
		t.Fatalf("the API VIP is not routed to another master alone 20 s after %s vanished: next hops %v", holder, next)
	}
	settled := time.Since(down)
	time.Sleep(2 * time.Second)
	close(sampling)
	<-sampled
	ok, failed := p.Stop()
	t.Logf("crossrack profile=%s bfd=%v bird=%v: %s vanished; routed to %s alone %s after; two next hops for %s, none for %s; %d requests answered, %d failed, the longest gap between answers %s; the route went %v",
		profile, bfd, bird, holder, addrOf[next[0]], settled.Round(time.Millisecond), two.Round(time.Millisecond), none.Round(time.Millisecond), ok, failed,
		p.LongestGap().Round(time.Millisecond), seen)
	if after := bl.nextHops(crossRackVIP); len(after) != 1 {
		t.Errorf("two seconds after the move the router has next hops %v, want the new holder alone:\n%s", after, routerTable())
	}
}

// settledHop waits up to 40 s for the router's route to vip to have one
// next hop, the same for two seconds (a router's session that went down
// once after it came up, as BIRD's do, is back), and returns it.
func settledHop(t *testing.T, bl *bgpLab, vip, what string, routerTable func() string) []string {
	t.Helper()
	var hops []string
	var since time.Time
	if !lab.WaitUntil(40*time.Second, func() bool {
		h := bl.nextHops(vip)
		if len(h) != 1 || !slices.Equal(h, hops) {
			hops, since = h, time.Now()
			return false
		}
		return time.Since(since) > 2*time.Second
	}) {
		t.Fatalf("the router's route to %s has next hops %v, want its holder alone, settled:\n%s", what, hops, routerTable())
	}
	return hops
}

// crossRackIngressMove: the routed ingress VIP is routed to one router
// node alone and answered by its router; that router goes unready (its
// health endpoint and the sidecar's view): the VIP moves over VRRP to the
// other rack's router node, whose route replaces the first's, and the
// client's answers come from it. The client's failed requests and the
// times are logged.
func crossRackIngressMove(t *testing.T, bl *bgpLab, addrOf map[string]string, routers []string, routerTable func() string) {
	t.Helper()
	hops := settledHop(t, bl, crossRackIngressVIP, "the ingress VIP", routerTable)
	holder := addrOf[hops[0]]
	if !slices.Contains(routers, holder) {
		t.Fatalf("the ingress VIP is routed to %s, which runs no router", holder)
	}
	p := lab.PollFrom(bl.client, "http://"+crossRackIngressVIP+"/", 20*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the routed ingress VIP", func() bool { ok, _ := p.Counts(); return ok > 10 })
	n := bl.lc.ByName[holder]
	began := time.Now()
	n.Routers["default"].SetReady(false)
	if err := runtimecfg.SetIngressReady(n.Target, "default", false); err != nil {
		t.Fatal(err)
	}
	var next []string
	if !lab.WaitUntil(20*time.Second, func() bool {
		next = bl.nextHops(crossRackIngressVIP)
		return len(next) == 1 && next[0] != hops[0]
	}) {
		t.Fatalf("the ingress VIP is not routed to the other router node 20 s after %s's router went unready: %v\n%s", holder, next, routerTable())
	}
	moved := time.Since(began)
	other := addrOf[next[0]]
	lab.WaitFor(t, 10*time.Second, "answers from "+other+"'s router", func() bool { return p.LastBody() == "default/"+other })
	ok, failed := p.Stop()
	if errs := p.Errors(); len(errs) > 0 {
		t.Logf("crossrack ingress: the failed requests: %s", strings.Join(errs, "; "))
	}
	t.Logf("crossrack ingress: %s's router unready; routed to %s alone %s after; %d requests answered, %d failed, the longest gap %s",
		holder, other, moved.Round(time.Millisecond), ok, failed, p.LongestGap().Round(time.Millisecond))
}

// TestBGPCrossRackAPIVIPBootstrap is day 1 with a routed API VIP. The
// bootstrap host stands in rack a (spec.bootstrap.labels) and runs the
// real `vipctl bootstrap`, which starts FRR beside keepalived and
// haproxy: the router learns the API VIP from it alone and a client
// behind the router is answered by its apiserver stand-in. The masters
// come up, m-b0 in rack b across the router: none of them may hold the
// VIP while the bootstrap host has not yielded (its adverts cross the
// router as theirs do). Then it yields: a master takes the VIP over VRRP
// and announces it, the bootstrap host withdraws it as it gives it up and
// stops, its session gone, and the router ends with the holder alone.
// The client's failed requests are logged.
func TestBGPCrossRackAPIVIPBootstrap(t *testing.T) {
	testCrossRackBootstrap(t, "")
}

// TestBGPMD5Bootstrap: the same day 1 with a password on every session
// (the router refuses any without it). The masters' sidecars would read
// it from the Secret; the bootstrap host, before the cluster exists, is
// given the Secret's manifest (--bgp-secret), as the admin adds it to the
// installer's manifests. Its session comes up (the router learns the VIP
// from it alone), its frr.conf is root's alone, and neither its output
// nor its result says the password.
func TestBGPMD5Bootstrap(t *testing.T) {
	testCrossRackBootstrap(t, bgpMD5Password)
}

// testCrossRackBootstrap is TestBGPCrossRackAPIVIPBootstrap, with password
// (when not empty) on every BGP session: in Secret "tor", given to the
// bootstrap host as its manifest and to the masters as their sidecars
// read it.
func testCrossRackBootstrap(t *testing.T, password string) {
	lab.RequireFRR(t)
	yaml := strings.Replace(bgpCrossRackYAML, "PROFILE", "fast", 1)
	yaml = strings.Replace(yaml, "  vrrp:", "  bootstrap:\n    addresses: ["+bootstrapAddr+"]\n    labels: {rack: a}\n  vrrp:", 1)
	router := withRouterBFD(upstreamFRR)
	var bootArgs []string
	if password != "" {
		yaml = strings.ReplaceAll(yaml, "        bfd: true\n", "        bfd: true\n        passwordSecret: tor\n")
		i := slices.Index(router, " address-family ipv4 unicast")
		router = slices.Insert(router, i, " neighbor nodes password "+password)
		secret := filepath.Join(lab.SharedDir(t, "vipctl-secret-"), "tor.yaml")
		writeFile(t, secret, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: tor, namespace: "+onnode.Namespace+"}\nstringData: {password: "+password+"}\n"))
		bootArgs = []string{"--bgp-secret", secret}
	}
	specs := []lab.NodeSpec{
		{Name: "m-a0", Addr: "198.51.100.21/24", ControlPlane: true, Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "m-a1", Addr: "198.51.100.22/24", ControlPlane: true, Labels: map[string]string{"rack": "a"}, Gateways: []string{"198.51.100.1"}},
		{Name: "m-b0", Addr: "203.0.113.21/26", ControlPlane: true, Labels: map[string]string{"rack": "b"}, Segment: "b", Gateways: []string{"203.0.113.1"}},
	}
	lc := lab.New(t, yaml)
	lc.AddSegment("b")
	if password != "" {
		lc.State.BGPPasswords = map[string]string{"tor": password}
	}
	bl := newBGPLab(t, lc, map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}, "b": {"203.0.113.1/26"}}, router)
	boot := lc.AddHost("bootstrap", netlab.HostOpts{Iface: "ens3", Addrs: []string{bootstrapAddr + "/24"}, Gateways: []string{"198.51.100.1"}})
	lab.ServeAPIStandIn(t, boot, bootstrapAddr, "bootstrap", 6443)
	b := startBootstrap(t, boot, yaml, specs, false, bootArgs...)
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(b.run + "/frr.log")
			t.Logf("--- bootstrap frr log:\n%s", tailLines(string(data), 25))
		}
	})
	bl.waitHops(t, crossRackVIP, []string{bootstrapAddr}, 40*time.Second)
	p := lab.PollFrom(bl.client, "https://"+crossRackVIP+":6443/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the bootstrap host", func() bool { ok, _ := p.Counts(); return ok > 50 })
	if body := p.LastBody(); body != "bootstrap" {
		t.Fatalf("the routed API VIP answered %q before any master ran; want the bootstrap host's apiserver", body)
	}
	if password != "" {
		if fi, err := os.Stat(filepath.Join(b.run, onnode.FRRConfPath)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the bootstrap host's frr.conf: %v, want mode 0600 (it holds the password)", err)
		}
	}

	lc.StartNodes(specs)
	w := watchHandover(lc, boot, crossRackVIP, b.run+"/"+onnode.DrainFile)
	addrOf := map[string]string{}
	for _, n := range lc.Nodes {
		startBGPNode(t, n)
		addrOf[strings.Split(n.Addr, "/")[0]] = n.Name
	}
	res := b.wait(t, w)
	var hops []string
	if !lab.WaitUntil(10*time.Second, func() bool {
		hops = bl.nextHops(crossRackVIP)
		return len(hops) == 1 && addrOf[hops[0]] != ""
	}) {
		t.Fatalf("after the bootstrap host stopped the router's route to the API VIP has next hops %v, want one master's", hops)
	}
	holder := lc.WaitHolder(crossRackVIP, 5*time.Second, func(string) bool { return true })
	if addrOf[hops[0]] != holder {
		t.Errorf("the API VIP is routed to %s but held by %s", addrOf[hops[0]], holder)
	}
	if out, _ := bl.router.Vtysh("show bgp neighbors " + bootstrapAddr + " json"); strings.Contains(out, `"bgpState":"Established"`) {
		t.Errorf("the router's session with the stopped bootstrap host is still up:\n%s", out)
	}
	leftovers(t, boot)
	before, _ := p.Counts()
	lab.WaitFor(t, 5*time.Second, "answers through "+holder, func() bool { ok, _ := p.Counts(); return ok > before+50 })
	if password != "" {
		res, _ := os.ReadFile(b.result)
		if out := b.proc.LogTail(1000) + string(res); strings.Contains(out, password) {
			t.Errorf("vipctl bootstrap's output or result says the password")
		}
	}
	ok, failed := p.Stop()
	t.Logf("crossrack bootstrap (fast profile, BFD), %s: the VIP left the bootstrap host %d ms after it yielded; routed to %s alone; %d requests answered, %d failed, the longest gap %s",
		time.Now().Format("2006-01-02"), res.HandoverMillis, holder, ok, failed, p.LongestGap().Round(time.Millisecond))
}
