package e2e

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
)

// A pool of both families whose Service addresses the sidecar announces.
const sidecarPool = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26, "2001:db8:100::1:0/112"]
      nodeSelector: {pool: web}
      instances: 2
      announce: sidecar
`

// startSidecarPool starts webPoolNodes (with IPv6 addresses too) with
// sidecarPool, allocates vips from it, brings every node in line and
// serves HTTP on port 8080 on the pool's nodes.
func startSidecarPool(t *testing.T, vips ...netip.Addr) *lab.Cluster {
	t.Helper()
	nodes := webPoolNodes()
	for i := range nodes {
		nodes[i].Addr6 = "2001:db8:100::" + nodes[i].Addr[len("198.51.100."):len(nodes[i].Addr)-len("/24")] + "/64"
	}
	lc := lab.Start(t, clusterYAML("fast", "unicast", sidecarPool), nodes)
	for _, v := range vips {
		lc.AddServiceVIP("web", v)
	}
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	for _, n := range []string{"worker-0", "worker-1"} {
		lc.ByName[n].StartEcho(t, "[::]:8080")
	}
	return lc
}

// TestSidecarAnnouncedPoolSurvivesNodeLoss: a pool with announce: sidecar
// on real keepalived. keepalived.conf names only the anchors; each node's
// sidecar code (LocalVIPs, as the sidecar runs it) adds the Service
// addresses on the node holding their instance's anchor, and a client
// polling one IPv4 and one IPv6 Service address every 10 ms is answered.
// A Service added later reloads no keepalived and answers. Then the
// holder leaves the network: the peer's keepalived takes the anchors, its
// sidecar adds the addresses and announces them, and the client is
// answered by the new holder. The IPv6 address is answered by a proxy
// neighbour entry throughout (the nodes carry the MachineConfig's
// settings), so this is also that design's failover.
func TestSidecarAnnouncedPoolSurvivesNodeLoss(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.130"), netip.MustParseAddr("2001:db8:100::1:7")
	lc := startSidecarPool(t, v4, v6)
	for _, n := range lc.Nodes {
		conf, err := os.ReadFile(filepath.Join(n.Target.Root, onnode.KeepalivedConfPath))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []netip.Addr{v4, v6} {
			if bytes.Contains(conf, []byte(" "+a.String()+"/")) {
				t.Errorf("%s: keepalived.conf names %s; the sidecar announces it", n.Name, a)
			}
		}
	}
	// Both families of one instance follow the same preferred node.
	settled := lc.SettledAll(v4.String(), v6.String())
	// The lab's nodes carry the MachineConfig's settings: the IPv6 Service
	// address is answered by a proxy entry, not put on the interface.
	holder6 := lc.ByName[settled[v6.String()]].Host
	if got := string(holder6.MustExec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex")); !strings.Contains(got, v6.String()) {
		t.Errorf("%s: no proxy entry for %s: %q", holder6.Name, v6, got)
	}
	if got := string(holder6.MustExec("ip", "-6", "addr", "show", "dev", "br-ex")); strings.Contains(got, " "+v6.String()+"/") {
		t.Errorf("%s: %s is on the interface, want it answered by a proxy entry:\n%s", holder6.Name, v6, got)
	}
	p4 := lc.Poll("http://198.51.100.130:8080/", 10*time.Millisecond)
	p6 := lc.Poll("http://[2001:db8:100::1:7]:8080/", 10*time.Millisecond)
	for _, p := range []*lab.Poller{p4, p6} {
		lab.WaitFor(t, 10*time.Second, "answers from the pool's addresses", func() bool { ok, _ := p.Counts(); return ok > 20 })
	}

	added := netip.MustParseAddr("198.51.100.131")
	lc.AddServiceVIP("web", added)
	for _, n := range lc.Nodes {
		if res := lc.Apply(n); slices.Contains(res.Reloaded, "keepalived") {
			t.Errorf("%s: adding a Service of a sidecar-announced pool reloaded keepalived (%+v)", n.Name, res)
		}
	}
	lc.WaitHolder(added.String(), 10*time.Second, inWebPool)
	pa := lc.Poll("http://198.51.100.131:8080/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the added Service's address", func() bool { ok, _ := pa.Counts(); return ok > 20 })
	pa.Stop()

	for _, vip := range []netip.Addr{v4, v6} {
		holder := settled[vip.String()]
		p := p4
		if vip.Is6() {
			p = p6
		}
		lc.ByName[holder].Host.LinkDown()
		next := lc.WaitNewHolder(vip.String(), holder, 10*time.Second)
		ok0, _ := p.Counts()
		lab.WaitFor(t, 10*time.Second, vip.String()+" answered by the new holder", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
		t.Logf("%s moved %s -> %s", vip, holder, next)
		lc.ByName[holder].Host.LinkUp()
		if settled[v6.String()] == holder {
			break // both went with the one node loss
		}
		settled[v6.String()] = lc.SettledAll(v6.String())[v6.String()]
	}
	for _, p := range []*lab.Poller{p4, p6} {
		_, fail := p.Stop()
		t.Logf("%d failed requests during the move", fail)
	}
}

// TestSidecarAnnouncedPoolAfterKeepalivedCrash: keepalived SIGKILLed on
// the holder leaves its anchor behind, as it leaves every address, and
// the sidecar keeps the Service addresses with it; the peer takes the
// instance, its sidecar adds and announces them, and the client follows
// the peer's neighbour advertisements. The crashed node's next
// keepalived removes the stale anchor at start, and its sidecar the
// addresses with it: in the end each address is on exactly one node.
func TestSidecarAnnouncedPoolAfterKeepalivedCrash(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8:100::1:7")
	lc := startSidecarPool(t, vip)
	holder := lc.Settled(vip.String())
	p := lc.Poll("http://[2001:db8:100::1:7]:8080/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the pool's address", func() bool { ok, _ := p.Counts(); return ok > 20 })

	crashed := lc.ByName[holder]
	crashed.CrashKeepalived(t)
	next := lc.WaitNewHolder(vip.String(), holder, 10*time.Second)
	if got := lc.Holders(vip.String()); !slices.Contains(got, holder) {
		t.Errorf("after keepalived's crash the address is on %v: the crashed node's sidecar removed it although keepalived left the anchor", got)
	}
	ok0, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "answers from "+next, func() bool { ok, _ := p.Counts(); return ok > ok0+20 })

	// The node's next keepalived, as a new container would start it: the
	// dead one's PID files gone (a killed VRRP child's file otherwise
	// makes keepalived say "daemon is already running" and exit).
	crashed.Keepalived.Stop()
	for _, f := range []string{onnode.KeepalivedPIDFile, onnode.VRRPPIDFile, onnode.CheckersPIDFile} {
		if err := os.Remove(filepath.Join(crashed.Target.Root, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	crashed.StartKeepalived()
	lc.WaitHolder(vip.String(), 30*time.Second, func(string) bool { return true })
	ok1, _ := p.Counts()
	lab.WaitFor(t, 10*time.Second, "answers once one node holds it", func() bool { ok, _ := p.Counts(); return ok > ok1+20 })
	_, fail := p.Stop()
	t.Logf("%s crashed, %s took over; %d failed requests", holder, next, fail)
}

// TestSidecarAnnouncedPoolColdStartWithoutAPI: every node of a pool with
// announce: sidecar loses power (lab.PowerOff) and boots again while the
// API is away, as in a cold start of a whole cluster, whose API comes
// back after its nodes. The init container renders keepalived.conf from
// the node's last-good view and keepalived takes the anchors; the
// sidecar, which cannot reach the API, follows them from the same view,
// so the IPv4 and IPv6 Service addresses answer before the API is back
// (the client's neighbour entries expired meanwhile, so an answer needs
// a node that answers for the address).
func TestSidecarAnnouncedPoolColdStartWithoutAPI(t *testing.T) {
	al, unsettled := startAnnounceLab(t, lab.BuildProbe(t), *announceProfile, 2, v1alpha1.AnnounceSidecar)
	if al == nil {
		t.Fatal(unsettled)
	}
	al.kc.API.RestartAPIServer(t, func() {
		var up time.Time
		al.powerCycle(t, func() { up = time.Now() })
		al.waitRecords(t, 30*time.Second, "both addresses answering while the API is away", func(rs map[string][]probe.Record) bool {
			return answeredAfter(rs["ipv4"], up) > 20 && answeredAfter(rs["ipv6"], up) > 20
		})
	})
}
