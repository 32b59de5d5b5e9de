package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/lab"
)

const apiVIP = "198.51.100.5"

// clusterYAML is the lab's ClusterVIPs with the API VIP and extra.
func clusterYAML(profile, mode string, extra string) string {
	return labYAML(fmt.Sprintf("  api: {vips: [%s]}\n", apiVIP), profile, mode, extra)
}

// poolsOnlyYAML is the lab's ClusterVIPs with spec.mode poolsOnly: the
// Service pools of extra alone, no API VIP.
func poolsOnlyYAML(profile, mode string, extra string) string {
	return labYAML("  mode: poolsOnly\n", profile, mode, extra)
}

// labYAML is the lab's ClusterVIPs with head and extra (each whole lines
// of spec) and the VRRP profile and mode.
func labYAML(head, profile, mode, extra string) string {
	return fmt.Sprintf(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:100::/64"]
%s%s  vrrp: {profile: %s, mode: %s}
`, head, extra, profile, mode)
}

func masters(n int) []lab.NodeSpec {
	var out []lab.NodeSpec
	for i := 0; i < n; i++ {
		out = append(out, lab.NodeSpec{Name: fmt.Sprintf("master-%d", i), Addr: fmt.Sprintf("198.51.100.%d/24", 11+i), ControlPlane: true})
	}
	return out
}

// TestAPIVIPThroughHaproxy: the API VIP answers through haproxy, which
// balances over every apiserver; a dead apiserver is routed around.
func TestAPIVIPThroughHaproxy(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", ""), masters(3))
	holder := lc.Settled(apiVIP)
	p := lc.Poll("https://"+apiVIP+":9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })

	// Kill one apiserver that is not on the holder (the holder's own
	// haproxy is what serves the VIP).
	victim := lc.ByName["master-0"]
	if victim.Name == holder {
		victim = lc.ByName["master-1"]
	}
	victim.APIServer.SetReady(false)
	victim.APIServer.Close()
	time.Sleep(3 * time.Second) // haproxy: fall 2 at inter 1s
	ok0, fail0 := p.Counts()
	time.Sleep(2 * time.Second)
	ok1, fail1 := p.Counts()
	p.Stop()
	if fail1 != fail0 || ok1-ok0 < 50 {
		t.Errorf("after haproxy marked %s down: %d more answers, %d more failures; want only answers", victim.Name, ok1-ok0, fail1-fail0)
	}
	if got := lc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
		t.Errorf("a dead backend moved the VIP: holders %v, was %s", got, holder)
	}
}

// TestAPIVIPStaysWhenNoAPIServerIsReady: every kube-apiserver fails
// /readyz at once but stays alive, as while etcd elects a leader after
// losing one. No node's haproxy turns unhealthy, so the VIP stays on its
// holder instead of being dropped by every node at once (each one's track
// script failing), and haproxy sends the requests to the live apiservers
// meanwhile: none fails.
func TestAPIVIPStaysWhenNoAPIServerIsReady(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", ""), masters(3))
	holder := lc.Settled(apiVIP)
	p := lc.Poll("https://"+apiVIP+":9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	for _, n := range lc.Nodes {
		n.APIServer.SetReady(false)
	}
	// haproxy marks them down after fall 2 at fastinter; keepalived's
	// check would fail after its own fall 2 at 1 s.
	time.Sleep(4 * time.Second)
	if got := lc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
		t.Errorf("with no apiserver ready the API VIP is held by %v, want %s as before", got, holder)
	}
	for _, n := range lc.Nodes {
		n.APIServer.SetReady(true)
	}
	time.Sleep(3 * time.Second)
	p.WantNoFailures(t, "the API VIP while no apiserver was ready")
	if got := lc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
		t.Errorf("after the apiservers were ready again the API VIP is held by %v, want %s", got, holder)
	}
}

// TestNodeLossMovesVIP: the holder's cable is pulled; another control-plane
// node takes the API VIP and clients get answers again.
func TestNodeLossMovesVIP(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", ""), masters(3))
	holder := lc.Settled(apiVIP)
	p := lc.Poll("https://"+apiVIP+":9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	lc.ByName[holder].Host.LinkDown()
	next := lc.WaitNewHolder(apiVIP, holder, 10*time.Second)
	ok0, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "answers from the new holder", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
	_, fail := p.Stop()
	t.Logf("VIP moved %s -> %s; %d failed requests during the move", holder, next, fail)
}

// TestKeepalivedCrashMovesVIP: keepalived dies hard on the holder (the VIP
// stays on its interface); a peer takes over and clients follow its
// gratuitous ARP.
func TestKeepalivedCrashMovesVIP(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", ""), masters(3))
	holder := lc.Settled(apiVIP)
	p := lc.Poll("https://"+apiVIP+":9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	lc.ByName[holder].CrashKeepalived(t)
	lc.WaitNewHolder(apiVIP, holder, 10*time.Second)
	ok0, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "answers after the crash", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
	p.Stop()
}

// handoverMasters is the size of TestPlannedHandover's clusters: each
// handover drains the holder for good, so N masters give N-1 handovers.
const handoverMasters = 6

// TestPlannedHandover: the holder is drained (local routes keep it
// serving its VIPs, its priority drops to 1), a peer preempts while it
// still serves, then its keepalived stops; then the new holder is drained
// in turn, five handovers per profile. A client opens a new TLS connection
// through haproxy every 10 ms (each takes a few ms, so many handovers
// catch one in flight), and not one request may fail.
//
// The deterministic half: before each drain a client opens a keep-alive
// connection to the holder; after the VIP has moved, a request over that
// same connection must be answered. Its segments now reach the new
// holder, which has no such connection: without the handover table
// sending them on to the drainer, it would reset them.
func TestPlannedHandover(t *testing.T) {
	for _, profile := range []string{"fast", "default"} {
		t.Run(profile, func(t *testing.T) {
			lc := lab.Start(t, clusterYAML(profile, "unicast", ""), masters(handoverMasters))
			holder := lc.Settled(apiVIP)
			url := "https://" + apiVIP + ":9445/"
			p := lc.Poll(url, 10*time.Millisecond)
			lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
			for i := 1; i < handoverMasters; i++ {
				kept := lc.OpenKept(t, url)
				old := lc.ByName[holder]
				lc.Drain(old)
				next := lc.WaitHolder(apiVIP, 30*time.Second, func(n string) bool { return n != holder })
				time.Sleep(500 * time.Millisecond) // let ARP caches follow the gratuitous ARP
				old.Keepalived.Stop()
				kept.WantAnsweredOver(t, fmt.Sprintf("handover %d (%s -> %s): a connection opened on the old holder", i, holder, next))
				t.Logf("handover %d: %s -> %s", i, holder, next)
				holder = next
			}
			p.WantNoFailures(t, fmt.Sprintf("%d planned handovers", handoverMasters-1))
		})
	}
}

// TestReturningNodeTakesItsVIPBackHitless: the holder is drained and
// stops (a reboot); its next pod starts undrained, and with the highest
// priority it preempts the node that took over. That node got no warning,
// yet no request fails: it kept the VIP local from the moment it held it,
// and the returning node learned from its adverts (priority below its
// own) whom it takes the VIP from. A keep-alive connection opened on the
// interim holder is answered over the same connection after the return.
func TestReturningNodeTakesItsVIPBackHitless(t *testing.T) {
	for _, profile := range []string{"fast", "default"} {
		t.Run(profile, func(t *testing.T) {
			lc := lab.Start(t, clusterYAML(profile, "unicast", ""), masters(3))
			first := lc.Settled(apiVIP)
			url := "https://" + apiVIP + ":9445/"
			p := lc.Poll(url, 10*time.Millisecond)
			lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
			returning := lc.ByName[first]
			lc.Drain(returning)
			interim := lc.WaitHolder(apiVIP, 30*time.Second, func(n string) bool { return n != first })
			time.Sleep(500 * time.Millisecond)
			returning.Keepalived.Stop()
			// The next pod: --once undrains, keepalived starts.
			returning.Undrain(t)
			kept := lc.OpenKept(t, url)
			returning.StartKeepalived()
			lc.WaitHolder(apiVIP, 30*time.Second, func(n string) bool { return n == first })
			time.Sleep(500 * time.Millisecond)
			kept.WantAnsweredOver(t, fmt.Sprintf("%s took the VIP back from %s: a connection opened on %s", first, interim, interim))
			p.WantNoFailures(t, fmt.Sprintf("%s -> %s (drain) -> %s (return)", first, interim, first))
		})
	}
}

// TestIngressShardVIPFollowsItsRouters: a shard's VIP only ever sits on a
// node with a ready router of that shard; when that router goes unready
// the VIP moves to the other one, never to a node running only the default
// controller's router.
func TestIngressShardVIPFollowsItsRouters(t *testing.T) {
	ingress := `  ingress:
    - name: default
      vips: [198.51.100.6]
    - name: internal
      domain: internal.lab.example.test
      vips: [198.51.100.7]
      healthPort: 1937
`
	specs := []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true},
		{Name: "master-1", Addr: "198.51.100.12/24", ControlPlane: true},
		{Name: "worker-0", Addr: "198.51.100.21/24"},
		{Name: "worker-1", Addr: "198.51.100.22/24"},
		{Name: "worker-2", Addr: "198.51.100.23/24"},
	}
	lc := lab.Start(t, clusterYAML("fast", "unicast", ingress), specs)
	placement := map[string][]string{"default": {"worker-0", "worker-1"}, "internal": {"worker-1", "worker-2"}}
	ports := map[string]int32{"default": 1936, "internal": 1937}
	vips := map[string]string{"default": "198.51.100.6", "internal": "198.51.100.7"}
	for _, n := range lc.Nodes {
		for ctrl, on := range placement {
			here := slices.Contains(on, n.Name)
			if here {
				n.StartRouter(t, ctrl, ports[ctrl], vips[ctrl])
			}
			// What the sidecar does when it sees (or not) a ready router
			// pod of this controller on this node.
			if err := runtimecfg.SetIngressReady(n.Target, ctrl, here); err != nil {
				t.Fatal(err)
			}
		}
	}
	inPlacement := func(ctrl string) func(string) bool {
		return func(n string) bool { return slices.Contains(placement[ctrl], n) }
	}
	holder := lc.WaitHolder(vips["internal"], 20*time.Second, inPlacement("internal"))
	lc.WaitHolder(vips["default"], 20*time.Second, inPlacement("default"))

	p := lc.Poll("http://"+vips["internal"]+"/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the internal shard", func() bool { ok, _ := p.Counts(); return ok > 20 })
	// The router stops being ready: the pod's health endpoint says so and
	// the sidecar sees the pod unready.
	lc.ByName[holder].Routers["internal"].SetReady(false)
	if err := runtimecfg.SetIngressReady(lc.ByName[holder].Target, "internal", false); err != nil {
		t.Fatal(err)
	}
	next := lc.WaitHolder(vips["internal"], 20*time.Second, func(n string) bool { return n != holder })
	if !inPlacement("internal")(next) {
		t.Fatalf("internal VIP moved to %s, which runs no internal router", next)
	}
	ok0, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "answers from the other internal router", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
	p.Stop()
	if body := p.LastBody(); body != "internal/"+next {
		t.Errorf("last answer %q, want internal/%s", body, next)
	}
}

// webPool is a service pool of two VRRP instances held by the nodes
// labelled pool=web.
const webPool = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      nodeSelector: {pool: web}
      instances: 2
`

// webPoolNodes are two control-plane nodes (the API VIP needs a pair) and
// the two pool=web workers, then extra.
func webPoolNodes(extra ...lab.NodeSpec) []lab.NodeSpec {
	return append([]lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true},
		{Name: "master-1", Addr: "198.51.100.12/24", ControlPlane: true},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}},
		{Name: "worker-1", Addr: "198.51.100.22/24", Labels: map[string]string{"pool": "web"}},
	}, extra...)
}

func inWebPool(node string) bool { return node == "worker-0" || node == "worker-1" }

// TestServicePoolsSpreadAndStayBound: a pool's VIPs are held by more than
// one of its nodes at once, never by nodes outside its nodeSelector.
func TestServicePoolsSpreadAndStayBound(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", webPool), webPoolNodes(lab.NodeSpec{Name: "worker-2", Addr: "198.51.100.23/24"}))
	var vips []string
	for a, i := netip.MustParseAddr("198.51.100.130"), 0; i < 6; a, i = a.Next(), i+1 {
		lc.AddServiceVIP("web", a)
		vips = append(vips, a.String())
	}
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	holders := map[string]bool{}
	for v, h := range lc.SettledAll(vips...) {
		if !inWebPool(h) {
			t.Errorf("%s held by %s, outside the pool's nodeSelector", v, h)
		}
		holders[h] = true
	}
	if len(holders) != 2 {
		t.Errorf("pool VIPs held by %v; want both pool nodes (active-active)", holders)
	}
}

// TestServiceVIPChangesLeaveOthersAlone: adding and removing service VIPs
// reloads keepalived on the pool's nodes; a client of an untouched VIP
// polling every 10 ms sees no failure, and the untouched instance no VRRP
// state change on any node. Removing an instance's last Service VIP takes
// it off every node; the instance stays with its anchor address.
func TestServiceVIPChangesLeaveOthersAlone(t *testing.T) {
	lc := lab.Start(t, clusterYAML("fast", "unicast", webPool), webPoolNodes())

	// Two VIPs in the instance the client watches (A), and three for the
	// other one (B): two to start with, one to add.
	byInstance := map[string][]netip.Addr{}
	var untouched, touched string
	for a := netip.MustParseAddr("198.51.100.130"); len(byInstance[touched]) < 3 || len(byInstance[untouched]) < 2; a = a.Next() {
		if !netip.MustParsePrefix("198.51.100.128/26").Contains(a) {
			t.Fatalf("the pool's addresses do not fill both instances: %v", byInstance)
		}
		inst := instanceFor(t, lc, "worker-0", "web", a)
		if untouched == "" {
			untouched = inst
		} else if touched == "" && inst != untouched {
			touched = inst
		}
		byInstance[inst] = append(byInstance[inst], a)
	}
	a, b := byInstance[untouched][:2], byInstance[touched][:3]
	for _, v := range []netip.Addr{a[0], a[1], b[0], b[1]} {
		lc.AddServiceVIP("web", v)
	}
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	settled := lc.SettledAll(a[0].String(), a[1].String(), b[0].String(), b[1].String())
	watched := a[0].String()
	holder := settled[watched]
	for _, n := range []string{"worker-0", "worker-1"} {
		lc.ByName[n].StartEcho(t, "0.0.0.0:8080")
	}
	p := lc.Poll("http://"+watched+":8080/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the pool VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })

	// change applies one update to every node, as the sidecars do, and
	// checks that instance A went through it without a state change.
	change := func(what string, edit func()) {
		t.Helper()
		since := lc.Mark()
		edit()
		for _, n := range lc.Nodes {
			res := lc.Apply(n)
			if inWebPool(n.Name) && !slices.Contains(res.Reloaded, "keepalived") {
				t.Errorf("%s: %s: keepalived not reloaded (result %+v)", what, n.Name, res)
			}
		}
		time.Sleep(2 * time.Second) // ten adverts: a flap would show
		if got := lc.Transitions(since, untouched); len(got) > 0 {
			t.Errorf("%s: untouched instance %s changed state: %q", what, untouched, got)
		}
		t.Logf("%s: instance %s: %q", what, touched, lc.Transitions(since, touched))
	}
	change("adding "+b[2].String(), func() { lc.AddServiceVIP("web", b[2]) })
	lc.WaitHolder(b[2].String(), 10*time.Second, inWebPool)

	change("removing "+b[0].String()+" and "+b[1].String(), func() { lc.RemoveServiceVIPs("web", b[0], b[1]) })
	for _, v := range b[:2] {
		if h := lc.Holders(v.String()); len(h) > 0 {
			t.Errorf("removed VIP %s still held by %v", v, h)
		}
	}
	if h := lc.Holders(b[2].String()); len(h) != 1 {
		t.Errorf("%s, left in its instance, held by %v", b[2], h)
	}

	change("removing the last Service VIP of "+touched, func() { lc.RemoveServiceVIPs("web", b[2]) })
	if h := lc.Holders(b[2].String()); len(h) > 0 {
		t.Errorf("removed VIP %s still held by %v", b[2], h)
	}
	for _, n := range []string{"worker-0", "worker-1"} {
		conf, err := os.ReadFile(filepath.Join(lc.ByName[n].Target.Root, onnode.KeepalivedConfPath))
		if err != nil {
			t.Fatal(err)
		}
		// The instance stays, advertising only its anchor, ready for the
		// next Service.
		if !strings.Contains(string(conf), "vrrp_instance "+touched+" ") {
			t.Errorf("%s: instance %s left keepalived.conf with its last Service VIP", n, touched)
		}
	}

	ok, fail := p.Stop()
	if fail != 0 {
		t.Errorf("the untouched VIP %s failed %d of %d requests (%q)", watched, fail, ok+fail, p.Errors())
	}
	if h := lc.Holders(watched); !slices.Equal(h, []string{holder}) {
		t.Errorf("untouched VIP %s moved from %s to %v", watched, holder, h)
	}

	// The counter itself: a real state change of instance A must show.
	since := lc.Mark()
	lc.Drain(lc.ByName[holder])
	lc.WaitHolder(watched, 10*time.Second, func(n string) bool { return n != holder })
	lab.WaitFor(t, 5*time.Second, "the handover of "+untouched+" in keepalived's logs", func() bool { return len(lc.Transitions(since, untouched)) >= 2 })
}

// instanceFor names the vrrp_instance of node's keepalived.conf that
// would hold vip if it were allocated from pool now. It renders only.
func instanceFor(t testing.TB, lc *lab.Cluster, node, pool string, vip netip.Addr) string {
	t.Helper()
	st := lc.State
	st.ServiceVIPs = maps.Clone(st.ServiceVIPs)
	if st.ServiceVIPs == nil {
		st.ServiceVIPs = map[string][]netip.Addr{}
	}
	st.ServiceVIPs[pool] = append(slices.Clone(st.ServiceVIPs[pool]), vip)
	d, err := runtimecfg.DesiredNode(cluster.Compile(lc.Config), st, node, lc.ByName[node].Target.Root)
	files := d.Files
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path != onnode.KeepalivedConfPath {
			continue
		}
		inst := ""
		for _, line := range strings.Split(string(f.Data), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) > 1 && fields[0] == "vrrp_instance":
				inst = fields[1]
			case len(fields) > 0 && strings.HasPrefix(fields[0], vip.String()+"/"):
				return inst
			}
		}
	}
	t.Fatalf("%s: no instance holds %s", node, vip)
	return ""
}

// multicastDualStack is a cluster in multicast mode with an IPv4 and an
// IPv6 API VIP (2001:db8:100::5), and n control-plane nodes of both
// families.
func multicastDualStack(n int) (string, []lab.NodeSpec) {
	yaml := strings.Replace(clusterYAML("fast", "multicast", ""), "api: {vips: [198.51.100.5]}", `api: {vips: [198.51.100.5, "2001:db8:100::5"]}`, 1)
	specs := masters(n)
	for i := range specs {
		specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
	}
	return yaml, specs
}

// TestMulticastAndIPv6: multicast VRRP and an IPv6 API VIP.
func TestMulticastAndIPv6(t *testing.T) {
	yaml, specs := multicastDualStack(3)
	lc := lab.Start(t, yaml, specs)
	h4 := lc.Settled(apiVIP)
	h6 := lc.Settled("2001:db8:100::5")
	if h4 != h6 {
		t.Logf("IPv4 and IPv6 API VIPs on different nodes (%s, %s)", h4, h6)
	}
	p := lc.Poll("https://[2001:db8:100::5]:9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers on the IPv6 VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	lc.ByName[h6].Host.LinkDown()
	lc.WaitNewHolder("2001:db8:100::5", h6, 10*time.Second)
	ok0, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "IPv6 answers from the new holder", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
	p.Stop()
}

// TestPlannedHandoverDualStack: a drain of the dual-stack API VIP's
// holder, unicast and multicast. In multicast mode IPv6 adverts come from
// link-local addresses, which the handover table accepts as well: the
// forwarded segments leave through the VRRP interface. No request to the
// IPv6 VIP fails, and connections opened on the old holder, to either
// VIP, are answered after the move.
func TestPlannedHandoverDualStack(t *testing.T) {
	const vip6 = "2001:db8:100::5"
	for _, mode := range []string{"unicast", "multicast"} {
		t.Run(mode, func(t *testing.T) {
			yaml := strings.Replace(clusterYAML("fast", mode, ""), "api: {vips: [198.51.100.5]}", `api: {vips: [198.51.100.5, "`+vip6+`"]}`, 1)
			specs := masters(3)
			for i := range specs {
				specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
			}
			lc := lab.Start(t, yaml, specs)
			holder := lc.Settled(vip6)
			if h4 := lc.Settled(apiVIP); h4 != holder {
				t.Fatalf("the API VIP's families sit on %s and %s; both families of a key share priorities", h4, holder)
			}
			url := "https://[" + vip6 + "]:9445/"
			p := lc.Poll(url, 10*time.Millisecond)
			lab.WaitFor(t, 10*time.Second, "answers on the IPv6 VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
			kept := map[string]*lab.KeptConn{vip6: lc.OpenKept(t, url), apiVIP: lc.OpenKept(t, "https://"+apiVIP+":9445/")}
			old := lc.ByName[holder]
			lc.Drain(old)
			next := lc.WaitHolder(vip6, 30*time.Second, func(n string) bool { return n != holder })
			lc.WaitHolder(apiVIP, 30*time.Second, func(n string) bool { return n != holder })
			time.Sleep(500 * time.Millisecond)
			old.Keepalived.Stop()
			for vip, k := range kept {
				k.WantAnsweredOver(t, fmt.Sprintf("%s -> %s: a connection to %s opened on the old holder", holder, next, vip))
			}
			p.WantNoFailures(t, fmt.Sprintf("%s -> %s over IPv6", holder, next))
		})
	}
}
