package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestPoolsOnlyBesideOpenShiftsKeepalived: a cluster installed with
// OpenShift's default load balancer, three masters. On every node
// OpenShift's own keepalived holds the API and ingress VIPs with the
// config OpenShift renders (lab.StartOpenShiftKeepalived: its paths, its
// command line, PASS authentication, VRRPv2 at 1 s, the IDs `vipctl
// vr-ids` reports for it), and vipctl's, from examples/pools-only.yaml,
// holds two pools beside it: one whose Service addresses keepalived adds,
// one whose the sidecar adds, both families. The same VRRP version and
// interval on both sides and the nodes' addresses as each other's peers:
// only the VRRP IDs keep them apart.
//
// It shows that
//   - vr-ids keeps vipctl's IDs clear of OpenShift's, and both sides'
//     adverts are on the wire (captured on every node with vr-ids' own
//     listener);
//   - no advert crosses over: every instance on both sides counts only
//     adverts of its own (no packet or authentication error, which an
//     advert of the other side reaching it would be: no authentication
//     against PASS, other addresses);
//   - vipctl's reconcile leaves OpenShift's keepalived.conf as written,
//     and installs no API redirect;
//   - every address on the nodes' interfaces but their own carries the
//     mark OVN-Kubernetes skips (label vip, IPv6 deprecated), vipctl's
//     anchors and Service addresses as OpenShift's VIPs;
//   - OpenShift's keepalived stopping on the API VIP's holder moves its
//     VIP and changes nothing of vipctl's (no holder, no state), and
//     vipctl's keepalived stopping on a Service address's holder moves
//     that address and changes nothing of OpenShift's.
func TestPoolsOnlyBesideOpenShiftsKeepalived(t *testing.T) {
	cfg, err := os.ReadFile(fixture.Repo("examples/pools-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var specs []lab.NodeSpec
	var masters []string
	for i := 0; i < 3; i++ {
		addr := fmt.Sprintf("198.51.100.%d", 11+i)
		specs = append(specs, lab.NodeSpec{Name: fmt.Sprintf("master-%d", i), Addr: addr + "/24", Addr6: fmt.Sprintf("2001:db8:100::%d/64", 11+i), ControlPlane: true})
		masters = append(masters, addr)
	}
	lc := lab.Start(t, string(cfg), specs)
	// Without the proxy settings the sidecar puts its IPv6 Service
	// addresses on the interface, as addresses whose mark is read below.
	for _, n := range lc.Nodes {
		n.Host.MustExec("sysctl", "-q", "-w", "net.ipv6.conf.all.proxy_ndp=0", "net.ipv6.conf.br-ex.proxy_ndp=0")
	}

	report, err := vrid.Check{Request: vrid.RequestFor(lc.Config)}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	openshiftIDs, vipctlIDs := map[uint8]bool{}, map[uint8]bool{}
	for _, e := range report.OpenShiftKeepalived {
		openshiftIDs[e.ID] = true
	}
	for _, e := range report.IDs {
		vipctlIDs[e.ID] = true
		if openshiftIDs[e.ID] {
			t.Fatalf("vr-ids gives %s ID %d, OpenShift's own", e.Key, e.ID)
		}
	}
	if len(report.OpenShiftKeepalived) != 2 {
		t.Fatalf("vr-ids reports OpenShift's IDs %v, want the API's and the ingress's", report.OpenShiftKeepalived)
	}
	const apiVIP, ingressVIP = "198.51.100.5", "198.51.100.6"
	ocp := lab.OpenShiftVRRP{Cluster: lc.Config.Metadata.Name, APIVIP: apiVIP, IngressVIP: ingressVIP,
		APIID: report.OpenShiftKeepalived[0].ID, IngressID: report.OpenShiftKeepalived[1].ID, Masters: masters, AllNodes: masters}
	openshift := map[string]*lab.OpenShiftKeepalived{}
	t.Cleanup(func() {
		if t.Failed() {
			for name, k := range openshift {
				t.Logf("--- %s OpenShift's keepalived log:\n%s", name, k.Proc.LogTail(40))
			}
		}
	})
	for _, n := range lc.Nodes {
		openshift[n.Name] = n.StartOpenShiftKeepalived(t, ocp)
	}

	// Service addresses of both pools, both families (the anchors are the
	// last addresses of each range).
	svc := map[string][]netip.Addr{
		"general": fixture.Addrs("198.51.100.130", "2001:db8:100::1:7"),
		"bulk":    fixture.Addrs("198.51.100.70", "2001:db8:100::2:7"),
	}
	var vips []string
	for pool, addrs := range svc {
		for _, a := range addrs {
			lc.AddServiceVIP(pool, a)
			vips = append(vips, a.String())
		}
	}
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	ours := slices.Clone(vips)
	theirs := []string{apiVIP, ingressVIP}
	holders := lc.SettledAll(append(slices.Clone(ours), theirs...)...)
	t.Logf("holders: %v", holders)

	for _, n := range lc.Nodes {
		if got, err := os.ReadFile(openshift[n.Name].ConfPath); err != nil || !bytes.Equal(got, openshift[n.Name].Conf) {
			t.Errorf("%s: OpenShift's %s changed by vipctl (err %v)", n.Name, fixture.OpenShiftKeepalivedConf, err)
		}
		var tables []*nftables.Table
		if err := n.Host.Do(func() error {
			conn, err := nftables.New()
			if err == nil {
				tables, err = conn.ListTablesOfFamily(nftables.TableFamilyINet)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(tables, func(tb *nftables.Table) bool { return tb.Name == dataplane.RedirectTable }) {
			t.Errorf("%s: table inet %s, the API redirect, in mode poolsOnly", n.Name, dataplane.RedirectTable)
		}
	}

	// On the wire: both sides' IDs, nothing else.
	seen := listenAll(t, lc, 3*time.Second)
	for id := range openshiftIDs {
		if !seen[id] {
			t.Errorf("OpenShift's VRID %d not seen on the wire (seen %v)", id, seen)
		}
	}
	for id := range vipctlIDs {
		if !seen[id] {
			t.Errorf("vipctl's VRID %d not seen on the wire (seen %v)", id, seen)
		}
	}
	for id := range seen {
		if !openshiftIDs[id] && !vipctlIDs[id] {
			t.Errorf("VRID %d on the wire is neither side's", id)
		}
	}

	checkMarks(t, lc, append(slices.Clone(ours), theirs...))

	// OpenShift's side fails over; vipctl's does not notice.
	mark := lc.Mark()
	apiHolder := lc.ByName[holders[apiVIP]]
	openshift[apiHolder.Name].Proc.Stop()
	next := lc.WaitNewHolder(apiVIP, apiHolder.Name, 15*time.Second)
	t.Logf("OpenShift's keepalived stopped on %s: API VIP moved to %s", apiHolder.Name, next)
	time.Sleep(3 * time.Second) // three adverts: a disturbance would show
	for _, v := range ours {
		if got := lc.Holders(v); !slices.Equal(got, []string{holders[v]}) {
			t.Errorf("vipctl's %s moved from %s to %v when OpenShift's API VIP failed over", v, holders[v], got)
		}
	}
	if got := lc.Transitions(mark); len(got) > 0 {
		t.Errorf("vipctl's keepalived changed state when OpenShift's failed over: %q", got)
	}
	openshift[apiHolder.Name] = apiHolder.StartOpenShiftKeepalived(t, ocp)
	theirHolders := lc.SettledAll(theirs...)

	// vipctl's side fails over; OpenShift's does not notice.
	offsets := map[string]int{}
	for name, k := range openshift {
		offsets[name] = k.LogSize()
	}
	watched := svc["general"][0].String()
	ourHolder := lc.ByName[holders[watched]]
	moved := []string{}
	for _, v := range ours {
		if holders[v] == ourHolder.Name {
			moved = append(moved, v)
		}
	}
	ourHolder.Keepalived.Stop()
	for _, v := range moved {
		next := lc.WaitNewHolder(v, ourHolder.Name, 15*time.Second)
		t.Logf("vipctl's keepalived stopped on %s: %s moved to %s", ourHolder.Name, v, next)
	}
	time.Sleep(3 * time.Second)
	for _, v := range theirs {
		if got := lc.Holders(v); !slices.Equal(got, []string{theirHolders[v]}) {
			t.Errorf("OpenShift's %s moved from %s to %v when vipctl's %v failed over", v, theirHolders[v], got, moved)
		}
	}
	for name, k := range openshift {
		if got := k.Transitions(offsets[name]); len(got) > 0 {
			t.Errorf("%s: OpenShift's keepalived changed state when vipctl's failed over: %q", name, got)
		}
	}

	// Every instance of both sides counted only its own adverts, through
	// both failovers.
	for _, n := range lc.Nodes {
		sides := map[string]map[string]lab.VRRPStats{"OpenShift's": openshift[n.Name].Stats(t)}
		if n != ourHolder {
			sides["vipctl's"] = n.KeepalivedStats(t)
		}
		for side, stats := range sides {
			for inst, s := range stats {
				if s["Advertisements/Received"]+s["Advertisements/Sent"] == 0 {
					t.Errorf("%s: %s instance %s neither sent nor received an advert: %v", n.Name, side, inst, s)
				}
				if s.Errors() != 0 {
					t.Errorf("%s: %s instance %s dropped adverts not its own: %v", n.Name, side, inst, s)
				}
			}
		}
	}
}

// listenAll captures VRRP adverts on every node's interface at once with
// vr-ids' listener and returns the IDs seen.
func listenAll(t *testing.T, lc *lab.Cluster, d time.Duration) map[uint8]bool {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	seen := map[uint8]bool{}
	for _, n := range lc.Nodes {
		wg.Add(1)
		go func(h *netlab.Host) {
			defer wg.Done()
			var obs []vrid.Observation
			err := h.Do(func() error {
				c, err := vrid.Listen(context.Background(), "br-ex", d)
				if c != nil {
					obs = c.Routers
				}
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s: listening: %v", h.Name, err)
			}
			for _, o := range obs {
				seen[o.ID] = true
			}
		}(n.Host)
	}
	wg.Wait()
	return seen
}

// checkMarks reads every node's interface (`ip -j -d addr`) and fails for
// an address that is not the node's own yet lacks the mark OVN-Kubernetes
// skips (netlab.Addr.MarkedNotNodes); each of vips must have been seen.
func checkMarks(t *testing.T, lc *lab.Cluster, vips []string) {
	t.Helper()
	own := map[netip.Addr]bool{}
	for _, n := range lc.State.Nodes {
		for _, a := range n.Addresses {
			own[a] = true
		}
	}
	found := map[string]bool{}
	for _, n := range lc.Nodes {
		addrs, err := n.Host.Addrs("br-ex")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if own[a.Addr] {
				if a.MarkedNotNodes() {
					t.Errorf("%s: its own address %s reads as a VIP: the check proves nothing", n.Name, a)
				}
				continue
			}
			found[a.Addr.String()] = true
			if !a.MarkedNotNodes() {
				t.Errorf("%s: %s is no node address, yet OVN-Kubernetes would take it for one", n.Name, a)
			}
		}
	}
	for _, v := range vips {
		if !found[v] {
			t.Errorf("%s on no node's interface (seen %v)", v, slices.Sorted(maps.Keys(found)))
		}
	}
	t.Logf("marked as VIPs on the nodes: %v", slices.Sorted(maps.Keys(found)))
}
