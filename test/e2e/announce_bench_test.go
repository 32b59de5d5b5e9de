package e2e

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/announcebench"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
)

var (
	announceTrials      = flag.Int("announce-trials", 5, "BenchmarkAnnounce: trials per mode and fault (a fresh lab each)")
	announceProfile     = flag.String("announce-profile", "fast", "BenchmarkAnnounce: the VRRP profile")
	announceSidecarDown = flag.Duration("announce-sidecar-down", 5*time.Second, "BenchmarkAnnounce: how long a crashed sidecar stays down before it restarts (sidecar-crash, sidecar-down-node-loss)")
	announceAPIDown     = flag.Duration("announce-api-down", 10*time.Second, "BenchmarkAnnounce: cold-start-api-down: how long after the nodes boot the API starts answering (then kube-apiserver's own start)")
)

// The faults BenchmarkAnnounce injects, in the order it prints them.
var announceFaults = []string{"node-loss", "keepalived-kill", "sidecar-crash", "sidecar-down-node-loss", "planned", "cold-start", "cold-start-api-down"}

// announcePool is the small pool both modes are measured on: every node
// of the lab, its default two instances per family, IPv4 and IPv6.
const announcePool = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26, "2001:db8:100::1:0/112"]
      announce: %s
`

// BenchmarkAnnounce measures `announce: keepalived` against `announce:
// sidecar` on a small pool: two control-plane lab nodes with the real
// apiserver, keepalived and sidecars, the pool on both (two instances per
// family), two Service addresses per instance and family. A client in its
// own namespace asks one IPv4 and one IPv6 Service address held by the
// same node (the victim) every 10 ms without waiting (250 ms timeout), as
// BenchmarkFailover does; the client and the echo servers behind the
// addresses are labprobe processes (lab.StartPollProcess), out of the
// benchmark process that runs the sidecars. Faults:
//
//   - node-loss: the victim leaves the network; fault → first answer from
//     the other node.
//   - keepalived-kill: keepalived's parent and VRRP child SIGSTOPped and
//     SIGKILLed on the victim (lab notes, pitfalls 1 and 2); the same.
//   - sidecar-crash: the victim's sidecar stopped with no cleanup, started
//     again -announce-sidecar-down later as its container restarts
//     (lab.RestartSidecar); the longest run of failed requests (from the
//     start of the first to the start of the next answered one) until a
//     second after it is ready.
//   - sidecar-down-node-loss: the other node's sidecar stopped, then the
//     victim lost; the sidecar restarts -announce-sidecar-down after the
//     loss; fault → first answer from the other node.
//   - planned: the victim's drain file written as keepalived's preStop
//     does, keepalived stopped once the other node holds both addresses;
//     the longest run of failed requests.
//   - cold-start: both nodes powered off (lab.PowerOff: processes killed,
//     kernel state and /run gone), then booted one after the other
//     (lab.PowerOn: init container, keepalived, sidecar); boot → first
//     answer.
//   - cold-start-api-down: the same while kube-apiserver is away, until
//     -announce-api-down after the boot plus its own start (api_back_ms).
//
// The two modes' trials alternate (keepalived first in even trials,
// sidecar first in odd ones), so that the machine's load falls on both
// alike. A trial whose lab never settles before the fault (keepalived's
// adverts late on an overloaded machine) is not measured, and counted as
// unsettled. One line per fault, mode and family, and the load before
// and after:
//
//	announce lab=process profile=P fault=F mode=M family=ipv4 trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=R [unsettled_trials=U] [sidecar_down_ms=D] [api_back_ms=A]
//	announce uptime=...
//
// `make bench-announce` runs it with BenchmarkAnnounceKubelet.
func BenchmarkAnnounce(b *testing.B) {
	announcebench.PrintUptime()
	probeBin := lab.BuildProbe(b)
	results := map[announcebench.Case][]announcebench.Sample{}
	unsettled := map[announcebench.Case]int{}
	for i := 0; i < *announceTrials; i++ {
		for _, fault := range announceFaults {
			if !failoverbench.Selected(*announcebench.Faults, fault) {
				continue
			}
			for _, mode := range announcebench.ModeOrder(i) {
				got := announceTrial(b, probeBin, *announceProfile, 2, mode, fault, i)
				if len(got) == 0 {
					unsettled[announcebench.Case{Lab: "process", Mode: mode, Fault: fault}]++
				}
				for family, s := range got {
					c := announcebench.Case{Lab: "process", Mode: mode, Fault: fault, Family: family}
					results[c] = append(results[c], s)
				}
			}
		}
	}
	announcebench.Print(results, unsettled, announceFaults, *announceProfile, func(c announcebench.Case) string {
		if c.Fault == "sidecar-crash" || c.Fault == "sidecar-down-node-loss" {
			return fmt.Sprintf(" sidecar_down_ms=%d", announceSidecarDown.Milliseconds())
		}
		return ""
	})
	announcebench.PrintUptime()
}

// announceLab is one trial's lab: the victim holds both polled
// addresses, other is the node that takes them. The echo servers and the
// client are labprobe processes: the benchmark process runs both nodes'
// sidecars, and a stall of it (a sidecar starting, garbage collection on
// an overloaded machine) would otherwise fail requests that the network
// and the daemons answered.
type announceLab struct {
	kc            *lab.KubeCluster
	victim, other *lab.Node
	// polled are the addresses the client asks, urls its URLs, by family.
	polled map[string]netip.Addr
	urls   map[string]string
	poll   *lab.ProbeProc
}

// startAnnounceLab starts the lab for mode and waits until every Service
// address has one holder; if they never settle, it returns nil and says
// why (a test fails on it, a benchmark counts the trial as unsettled).
// probeBin is labprobe (lab.BuildProbe); the lab has nodes control-plane
// nodes and runs profile.
func startAnnounceLab(t testing.TB, probeBin, profile string, nodes int, mode string) (*announceLab, string) {
	t.Helper()
	specs := masters(nodes)
	for i := range specs {
		specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
	}
	kc := lab.StartKube(t, clusterYAML(profile, "unicast", fmt.Sprintf(announcePool, mode)), specs)
	kc.ApplyManifests(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		lab.StartEchoProcess(t, probeBin, n.Host, "[::]:8080", n.Name)
	}
	vips := announceVIPs(t, kc.Config)
	for i, a := range vips {
		name := fmt.Sprintf("svc-%d", i)
		kc.CreateLBService(t, name, "")
		kc.SetLBStatus(t, name, a.String())
	}
	for _, n := range kc.Nodes {
		kc.StartSidecar(t, n.Name)
	}
	names := make([]string, len(vips))
	for i, a := range vips {
		names[i] = a.String()
	}
	holders, ok := kc.SettleAll(names...)
	if !ok {
		return nil, fmt.Sprintf("the Service addresses never settled on one holder each (last %v, %s)", holders, announcebench.LoadAverage())
	}
	al := &announceLab{kc: kc, polled: map[string]netip.Addr{}, urls: map[string]string{}}
	for _, a := range vips {
		family := "ipv6"
		if a.Is4() {
			family = "ipv4"
		}
		h := holders[a.String()]
		if al.victim == nil {
			al.victim = kc.ByName[h]
		}
		if _, ok := al.polled[family]; !ok && h == al.victim.Name {
			al.polled[family] = a
			al.urls[family] = fmt.Sprintf("http://%s/", netip.AddrPortFrom(a, 8080))
		}
	}
	if len(al.polled) != 2 {
		t.Fatalf("%s holds no address of one family (%v): want one of each on it", al.victim.Name, holders)
	}
	for _, n := range kc.Nodes {
		if n != al.victim {
			al.other = n
		}
	}
	al.poll = lab.StartPollProcess(t, probeBin, kc.Client, []string{al.urls["ipv4"], al.urls["ipv6"]}, 10*time.Millisecond)
	al.waitRecords(t, 10*time.Second, "both addresses answering", func(rs map[string][]probe.Record) bool {
		return answeredAfter(rs["ipv4"], time.Time{}) > 20 && answeredAfter(rs["ipv6"], time.Time{}) > 20
	})
	return al, ""
}

// records are the client's requests so far (all of them once it has
// stopped), by family, in the order they started.
func (al *announceLab) records(t testing.TB) map[string][]probe.Record {
	t.Helper()
	out := map[string][]probe.Record{}
	for _, r := range al.poll.Records(t) {
		for family, url := range al.urls {
			if r.Kind == probe.KindRequest && r.URL == url {
				out[family] = append(out[family], r)
			}
		}
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
	}
	return out
}

// waitRecords reads the client's records every 200 ms (each read parses
// the whole file) until cond holds, for up to timeout.
func (al *announceLab) waitRecords(t testing.TB, timeout time.Duration, what string, cond func(map[string][]probe.Record) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(al.records(t)) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func answeredAfter(rs []probe.Record, since time.Time) int {
	n := 0
	for _, r := range rs {
		if r.OK && r.Start.After(since) {
			n++
		}
	}
	return n
}

// firstAnswer is when the first answer from a node ok accepts came (its
// request's start plus how long it took) after since.
func firstAnswer(rs []probe.Record, since time.Time, ok func(node string) bool) (time.Time, bool) {
	var first time.Time
	for _, r := range rs {
		if at := r.Start.Add(r.Took); r.OK && ok(r.Body) && at.After(since) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// firstAnswers waits, for each polled address, for the first answer
// after since from a node ok accepts, and returns how long after since
// it came.
func (al *announceLab) firstAnswers(t testing.TB, since time.Time, timeout time.Duration, ok func(string) bool) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	al.waitRecords(t, timeout, "answers from a new holder", func(rs map[string][]probe.Record) bool {
		for family := range al.urls {
			at, found := firstAnswer(rs[family], since, ok)
			if !found {
				return false
			}
			out[family] = at.Sub(since)
		}
		return true
	})
	return out
}

// longestGap is the longest run of failed requests: from the start of
// the first to the start of the next answered one.
func longestGap(rs []probe.Record) time.Duration {
	var longest time.Duration
	var from time.Time
	for _, r := range rs {
		switch {
		case !r.OK && from.IsZero():
			from = r.Start
		case r.OK && !from.IsZero():
			longest = max(longest, r.Start.Sub(from))
			from = time.Time{}
		}
	}
	return longest
}

// powerCycle powers every node off, then boots them one after the other;
// booting runs first.
func (al *announceLab) powerCycle(t testing.TB, booting func()) {
	t.Helper()
	for _, n := range al.kc.Nodes {
		al.kc.PowerOff(t, n.Name)
	}
	// A cluster is down for minutes, not the second it is here: long
	// enough for the client's neighbour entries of the addresses to fail,
	// so that an answer needs a node that answers for the address again (a
	// stale entry would take IPv6 packets to the node, whose takeover
	// routes accept them before anything answers neighbour solicitations).
	for _, fam := range []string{"-4", "-6"} {
		al.kc.Client.MustExec("ip", fam, "neigh", "flush", "all")
	}
	time.Sleep(time.Second)
	booting()
	for _, n := range al.kc.Nodes {
		al.kc.PowerOn(t, n.Name)
	}
}

// announceVIPs picks two Service addresses per instance and family of
// the pool, so both nodes hold some of each family.
func announceVIPs(t testing.TB, c *v1alpha1.ClusterVIPs) []netip.Addr {
	t.Helper()
	p := cluster.Compile(c).Pool("web")
	var out []netip.Addr
	for _, r := range p.Ranges {
		perInstance := map[int]int{}
		for a := r.First; !full(perInstance, p.Instances, 2); a = a.Next() {
			if !r.Contains(a) {
				t.Fatalf("%s: too few addresses for two per instance", p.Name)
			}
			if p.IsAnchor(a) || perInstance[p.Instance(a)] == 2 {
				continue
			}
			perInstance[p.Instance(a)]++
			out = append(out, a)
		}
	}
	return out
}

// full tells whether each of n instances has want addresses.
func full(perInstance map[int]int, n, want int) bool {
	for i := 0; i < n; i++ {
		if perInstance[i] < want {
			return false
		}
	}
	return true
}

// announceTrial runs one fault on a fresh lab in one mode and returns
// each polled address's sample. A sub-benchmark, so that its lab is torn
// down before the next trial starts.
func announceTrial(b *testing.B, probeBin, profile string, nodes int, mode, fault string, i int) map[string]announcebench.Sample {
	out := map[string]announcebench.Sample{}
	b.Run(fmt.Sprintf("%s-%s-%d", fault, mode, i), func(t *testing.B) {
		// At 100 ms adverts keepalived's adverts are late on a machine
		// loaded far past its cores, and the lab flaps; such a lab
		// measures nothing of the two modes: counted, not failed.
		al, unsettled := startAnnounceLab(t, probeBin, profile, nodes, mode)
		if al == nil {
			t.Log(unsettled)
			return
		}
		kc, victim, other := al.kc, al.victim, al.other
		notVictim := func(n string) bool { return n != victim.Name }
		anyNode := func(string) bool { return true }
		var outages map[string]time.Duration
		var extra time.Duration
		// from is where the failed requests that count start: the fault,
		// or the boot of a cold start.
		from := time.Now()
		switch fault {
		case "node-loss":
			victim.Host.LinkDown()
			outages = al.firstAnswers(t, from, 30*time.Second, notVictim)
		case "keepalived-kill":
			victim.CrashKeepalived(t)
			outages = al.firstAnswers(t, from, 30*time.Second, notVictim)
		case "sidecar-down-node-loss":
			kc.Sidecars[other.Name].Stop()
			from = time.Now()
			victim.Host.LinkDown()
			time.Sleep(time.Until(from.Add(*announceSidecarDown)))
			kc.RestartSidecar(t, other.Name)
			outages = al.firstAnswers(t, from, 30*time.Second, notVictim)
		case "sidecar-crash", "planned":
			mark := kc.Mark()
			if fault == "sidecar-crash" {
				kc.Sidecars[victim.Name].Stop()
				time.Sleep(*announceSidecarDown)
				sc := kc.RestartSidecar(t, victim.Name)
				lab.WaitFor(t, 30*time.Second, victim.Name+"'s sidecar ready again", func() bool { return sc.Ready() == nil })
				time.Sleep(time.Second)
			} else {
				// What keepalived's preStop does; the sidecar follows
				// the file.
				if err := os.WriteFile(filepath.Join(victim.Target.Root, onnode.DrainFile), []byte("1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, a := range al.polled {
					kc.WaitHolder(a.String(), 30*time.Second, notVictim)
				}
				time.Sleep(500 * time.Millisecond)
				victim.Keepalived.Stop()
				time.Sleep(300 * time.Millisecond)
			}
			// Whether the addresses moved on the way (a restarted
			// sidecar's --once renders the node held back until it has
			// synced), for the log.
			t.Logf("%s %s: VRRP state changes %q", fault, mode, kc.Transitions(mark))
		case "cold-start", "cold-start-api-down":
			var up time.Time
			cycle := func() { al.powerCycle(t, func() { up = time.Now() }) }
			if fault == "cold-start" {
				cycle()
			} else {
				kc.API.RestartAPIServer(t, func() {
					cycle()
					time.Sleep(time.Until(up.Add(*announceAPIDown)))
				})
				extra = time.Since(up)
			}
			from = up
			outages = al.firstAnswers(t, up, 3*time.Minute, anyNode)
		default:
			t.Fatalf("unknown fault %q", fault)
		}
		time.Sleep(300 * time.Millisecond)
		al.poll.Stop(t)
		records := al.records(t)
		for family, rs := range records {
			failed := 0
			for _, r := range rs {
				if !r.OK && !r.Start.Before(from) {
					failed++
				}
			}
			d, ok := outages[family]
			if !ok { // nothing moves: the longest run of failures
				d = longestGap(rs)
			}
			out[family] = announcebench.Sample{Outage: d, Failed: failed, Extra: extra}
			t.Logf("%s %s %s (%s on %s): outage %s, %d failed; %s", fault, mode, family, al.polled[family], victim.Name, d.Round(time.Millisecond), failed, announcebench.LoadAverage())
			if outages == nil {
				// Nothing moves for good: every failure wants explaining.
				for _, r := range rs {
					if !r.OK {
						t.Logf("  failed: %s %s", r.Start.Format("15:04:05.000"), r.Err)
					}
				}
			}
		}
		stalls := 0
		for _, r := range al.poll.Records(t) {
			if r.Kind == probe.KindStall {
				stalls++
			}
		}
		t.Logf("the client stalled %d times (≥ %s late)", stalls, probe.StallThreshold)
	})
	return out
}
