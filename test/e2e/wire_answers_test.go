package e2e

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestWireAnswers: three control-plane nodes with their sidecars (real
// keepalived, real apiserver, node credentials) ask the segment every
// second who answers for the API VIP, and a real Prometheus evaluates
// the rendered alerts over their metrics. Two faults the nodes' books do
// not show, each injected on the wire:
//   - a copy of the VIP on a host of the segment that is no node: every
//     node hears two answers, one of them no member's;
//     VipctlVIPAnsweredByStranger fires (no split brain: the books show
//     one holder), and each Node gets a VIPAnsweredByStranger Event
//     naming the stranger's MAC;
//   - the holder's ARP answers for the VIP dropped by its own firewall
//     (nftables, arp family): the other two hear nobody and
//     VipctlVIPUnanswered fires, while VRRP alone would keep the VIP
//     where it is. The holder heals it (heal.go): it announces the VIP
//     again, and as the others still hear nobody it steps down; a member
//     they hear takes over, with Events VIPReannounced and VIPSteppedDown
//     on the holder's Node, and no request through the VIP fails.
//
// `vipctl status` names each finding (the nodes' vipctl.io/wire
// annotations) and exits non-zero; each resolves once the fault is
// undone or healed, and status says nothing of the wire again. The times
// from fault to every node's view, to the alert firing and to the healed
// state are logged (docs/benchmarks.md).
func TestWireAnswers(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", ""), masters(3))
	kc.GrantNodeReaders(t)
	kc.WireInterval = time.Second
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	holder := kc.Settled(apiVIP)
	vip := netip.MustParseAddr(apiVIP)
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), kubeconfig)
	// statusSays waits until `vipctl status` (the nodes' vipctl.io/wire
	// annotations) says want on the wire, or nothing there for "".
	statusSays := func(what, want string) {
		t.Helper()
		var code int
		var out, errOut string
		if !lab.WaitUntil(30*time.Second, func() bool {
			code, out, errOut = vipctl(t, "status", "-f", kc.ConfigPath, "--kubeconfig", kubeconfig)
			if want == "" {
				return !strings.Contains(out, "On the wire") && !strings.Contains(errOut, "on the wire")
			}
			return strings.Contains(out, want) && code != 0 && strings.Contains(errOut, "on the wire")
		}) {
			t.Fatalf("%s: vipctl status (exit %d) does not say %q on the wire:\n%s%s", what, code, want, out, errOut)
		}
		if want != "" {
			t.Logf("%s: vipctl status, exit %d:\n%s%s", what, code, out, errOut)
		}
	}
	// views waits until each node's last question for the VIP found
	// want(node) answers, and says how long that took from since.
	views := func(what string, since time.Time, want func(node string) int) {
		t.Helper()
		lab.WaitFor(t, 30*time.Second, what, func() bool {
			for _, n := range kc.Nodes {
				if got, ok := kc.Sidecars[n.Name].Metrics.Wire.Answerers.Get(vip); !ok || got != want(n.Name) {
					return false
				}
			}
			return true
		})
		t.Logf("%s: %.1f s", what, time.Since(since).Seconds())
	}
	views("every node hearing one answer", time.Now(), func(string) int { return 1 })
	w := watchAlerts(t, kc.Config, sidecarTargets(kc)...)
	w.expect("one answer in every view")
	statusSays("one answer in every view", "")

	// A host outside the cluster given the VIP's address by hand.
	stranger := kc.AddHost("stranger", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.66/24"}})
	fault := time.Now()
	stranger.MustExec("ip", "addr", "add", apiVIP+"/32", "dev", "br-ex")
	views("a copy on a host outside the cluster, in every node's view", fault, func(string) int { return 2 })
	w.expect("a copy on a host outside the cluster", "VipctlVIPAnsweredByStranger vip="+apiVIP)
	t.Logf("copy: VipctlVIPAnsweredByStranger firing %.1f s after the fault (the lab's for: %s)", time.Since(fault).Seconds(), alertFor)
	for _, n := range kc.Nodes {
		if got, ok := kc.Sidecars[n.Name].Metrics.Wire.Strangers.Get(vip); !ok || got != 1 {
			t.Errorf("%s counts %d strangers answering for %s, want 1", n.Name, got, apiVIP)
		}
	}
	lab.WaitFor(t, 20*time.Second, "a VIPAnsweredByStranger Event naming the stranger on each Node", func() bool {
		list, err := kc.Admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + sidecar.ReasonVIPAnsweredByStranger})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, e := range list.Items {
			if strings.HasPrefix(e.Message, apiVIP+" (api) is answered on br-ex by "+stranger.MAC()+", ") {
				nodes[e.InvolvedObject.Name] = true
			}
		}
		return len(nodes) == len(kc.Nodes)
	})
	statusSays("a copy on a host outside the cluster", apiVIP+" is answered by "+stranger.MAC()+", which is no member of api (heard by master-0, master-1, master-2)")
	fixed := time.Now()
	stranger.MustExec("ip", "addr", "del", apiVIP+"/32", "dev", "br-ex")
	views("the copy removed", fixed, func(string) int { return 1 })
	w.expect("the copy removed")
	t.Logf("copy removed: resolved %.1f s after", time.Since(fixed).Seconds())
	statusSays("the copy removed", "")

	// The holder keeps the VIP, but its answers never leave it. A client
	// asks through the VIP all along: its neighbour entry for the VIP
	// outlives the fault's first seconds, not the half minute after.
	h := kc.ByName[holder].Host
	p := kc.Poll("https://"+apiVIP+":9445/", 20*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	fault = time.Now()
	h.MustExec("nft", "add table arp wirelab")
	h.MustExec("nft", "add chain arp wirelab out { type filter hook output priority 0 ; }")
	h.MustExec("nft", "add rule arp wirelab out arp saddr ip "+apiVIP+" drop")
	views("the holder's answers dropped, in every node's view", fault, func(n string) int {
		if n == holder {
			return 1 // itself
		}
		return 0
	})
	var askers []string
	for _, n := range kc.Nodes {
		if n.Name != holder {
			askers = append(askers, n.Name)
		}
	}
	statusSays("the holder's answers dropped", apiVIP+" is held by "+holder+" and answered by nobody (asked by "+strings.Join(askers, ", ")+")")
	w.expect("the holder's answers dropped", "VipctlVIPUnanswered vip="+apiVIP)
	t.Logf("answers dropped: VipctlVIPUnanswered firing %.1f s after the fault", time.Since(fault).Seconds())

	// Healing: the holder announces the VIP again; the others still hear
	// nobody, and it steps down; a member they hear takes the VIP over.
	var moved []string
	lab.WaitFor(t, 90*time.Second, "the holder stepping down and another member holding the VIP", func() bool {
		moved = kc.Holders(apiVIP)
		return len(moved) == 1 && moved[0] != holder
	})
	t.Logf("answers dropped: the VIP moved from %s to %s %.1f s after the fault", holder, moved[0], time.Since(fault).Seconds())
	views("healed: every node hears the new holder", fault, func(string) int { return 1 })
	w.expect("healed by a step-down", "VipctlVIPHolderSteppedDown node="+holder)
	t.Logf("answers dropped: VipctlVIPUnanswered resolved and VipctlVIPHolderSteppedDown firing %.1f s after the fault", time.Since(fault).Seconds())
	statusSays("healed by a step-down", "")
	p.WantNoFailures(t, "https://"+apiVIP+":9445/ from before the fault until healed")
	list, err := kc.Admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + holder})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Reason == sidecar.ReasonVIPReannounced || e.Reason == sidecar.ReasonVIPSteppedDown {
			reasons = append(reasons, e.Reason)
			t.Logf("%s's Event %s: %s", holder, e.Reason, e.Message)
		}
	}
	slices.Sort(reasons)
	if want := []string{sidecar.ReasonVIPReannounced, sidecar.ReasonVIPSteppedDown}; !slices.Equal(reasons, want) {
		t.Errorf("%s's healing Events %v, want %v", holder, reasons, want)
	}
	heal := kc.Sidecars[holder].Metrics.Heal
	if r, d := testutil.ToFloat64(heal.WithLabelValues("reannounce")), testutil.ToFloat64(heal.WithLabelValues("step-down")); r != 1 || d != 1 {
		t.Errorf("%s counts %v re-announcements and %v step-downs, want 1 and 1", holder, r, d)
	}

	// The fault undone, the stepped-down node stays away for its hold:
	// the VIP does not come back to it at once.
	h.MustExec("nft", "delete table arp wirelab")
	time.Sleep(3 * time.Second)
	if got := kc.Holders(apiVIP); !slices.Equal(got, moved) {
		t.Errorf("the API VIP is held by %v 3 s after the fault was undone; the node that stepped down must stay away for its hold, want %v", got, moved)
	}
	w.expect("the step-down's alert over (the lab's window)")
}
