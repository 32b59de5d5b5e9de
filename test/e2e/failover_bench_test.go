package e2e

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
)

var (
	trials = flag.Int("trials", 20, "failover benchmark: trials per profile and scenario")
)

// benchClusterYAML is the benchmarks' three-master cluster with -advert,
// when set, overriding the profile's advert interval.
func benchClusterYAML(profile string) string {
	y := clusterYAML(profile, "unicast", "")
	if *failoverbench.Advert == "" {
		return y
	}
	return strings.Replace(y, "mode: unicast}", "mode: unicast, advertInterval: "+*failoverbench.Advert+"}", 1)
}

// advertLabel is the advert interval a benchmark line ran with: the
// profile's own, or -advert, as the config defaults it.
func advertLabel(profile string) string { return failoverbench.AdvertOf(benchClusterYAML(profile)) }

// BenchmarkFailover measures, from a client in its own namespace opening a
// new connection every 10 ms (250 ms timeout, without waiting for earlier
// ones to end), how long the API VIP is
// unreachable when its holder fails, from the fault to the first good
// answer from the new holder. One line per profile and scenario:
//
//	failover profile=<p> advert=<a> scenario=<s> trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=F
//
// Run with `make bench-failover [TRIALS=N]`. The targets live in
// docs/benchmarks.md, not here: this prints, it does not judge.
func BenchmarkFailover(b *testing.B) {
	failoverbench.Cases(b, "", []string{"node-loss", "keepalived-kill", "planned"}, *trials, advertLabel, failoverTrial)
}

// failoverTrial builds a fresh three-master cluster (so trials share no
// state), injects one fault into the holder and returns the outage and the
// number of failed requests. Each trial is a sub-benchmark so its lab is
// torn down before the next starts.
func failoverTrial(b *testing.B, profile, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		lc := lab.Start(t, benchClusterYAML(profile), masters(3))
		for _, n := range lc.Nodes {
			n.StartEcho(t, "0.0.0.0:8080")
		}
		holder := lc.Settled(apiVIP)
		w := lc.Probe("http://"+apiVIP+":8080/", 10*time.Millisecond)
		lab.WaitFor(t, 10*time.Second, "answers", func() bool { ok, _ := w.Counts(); return ok > 20 })
		old := lc.ByName[holder]
		fault := time.Now()
		switch scenario {
		case "node-loss":
			old.Host.LinkDown()
		case "keepalived-kill":
			old.CrashKeepalived(t)
		case "planned":
			lc.Drain(old)
			lc.WaitHolder(apiVIP, 30*time.Second, func(n string) bool { return n != holder })
			time.Sleep(500 * time.Millisecond)
			old.Keepalived.Stop()
		}
		outage, failed = moveOutage(t, w, holder, fault, scenario == "planned", 30*time.Second)
	})
	return outage, failed
}

// moveOutage waits up to timeout for the first answer after fault from
// another node than holder, stops w, and returns the outage and the
// failed requests. The outage is the time to that answer, or for a
// planned move the longest run of failures: make-before-break, the old
// holder serves until the new one has the VIP, so how long the handover
// takes is not an outage.
func moveOutage(t testing.TB, w *lab.Poller, holder string, fault time.Time, planned bool, timeout time.Duration) (time.Duration, int) {
	t.Helper()
	first := w.FirstFrom(t, func(node string) bool { return node != holder }, fault, timeout)
	time.Sleep(300 * time.Millisecond)
	_, failed := w.Stop()
	if planned {
		return w.LongestGap(), failed
	}
	return first.Sub(fault), failed
}

var steadyFor = flag.Duration("steady", 10*time.Minute, "steady-state benchmark: how long to watch")

// BenchmarkSteadyState runs the fast profile (100 ms adverts, or -advert) for -steady
// with both CPUs kept busy by burner processes and counts false failovers:
// VRRP state changes and client failures while nothing is wrong. Prints:
//
//	steady profile=fast advert=A minutes=M busy_cpus=2 false_failovers=F failed_requests=R
func BenchmarkSteadyState(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		lc := lab.Start(b, benchClusterYAML("fast"), masters(3))
		for _, n := range lc.Nodes {
			n.StartEcho(b, "0.0.0.0:8080")
		}
		holder := lc.Settled(apiVIP)
		before := lc.Mark()
		// Burners live in the client namespace like every other process of
		// the lab; they only spin.
		for i := 0; i < 2; i++ {
			lc.Client.Start(fmt.Sprintf("burner-%d", i), "sh", "-c", "while :; do :; done")
		}
		w := lc.Poll("http://"+apiVIP+":8080/", 10*time.Millisecond)
		time.Sleep(*steadyFor)
		_, failed := w.Stop()
		falseFailovers := len(lc.Transitions(before))
		if got := lc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
			falseFailovers++ // the VIP moved even if the logs missed it
		}
		fmt.Fprintf(os.Stdout, "steady profile=fast advert=%s minutes=%.0f busy_cpus=2 false_failovers=%d failed_requests=%d\n", advertLabel("fast"), steadyFor.Minutes(), falseFailovers, failed)
	})
}
