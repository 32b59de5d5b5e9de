package e2e

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/e2e/failoverbench"
)

// BenchmarkFailoverBGP measures, for a bgp pool announced by three nodes
// on two subnets (the lab of TestBGPTwoRacksECMP), what a client behind
// the router sees when one announcing node vanishes: a new connection
// every 10 ms (200 ms timeout) to the Service address, the outage being
// the time from the fault to the last failed connection (only the flows
// hashed to the lost node fail). One line per detection:
//
//	failover mode=bgp detection=<hold-3s|bfd-300ms> scenario=node-loss trials=N median_ms=X p95_ms=Y max_ms=Z withdraw_median_ms=W failed_requests=F
//
// `make bench-failover` runs it with the VRRP lines; docs/bgp.md holds
// the numbers.
func BenchmarkFailoverBGP(b *testing.B) {
	if *trials < 1 {
		return // -trials=0: the other labs' lines only (make bench-failover TRIALS=0)
	}
	for _, bfd := range []bool{false, true} {
		detection := "hold-3s"
		if bfd {
			detection = "bfd-300ms"
		}
		b.Run(detection, func(b *testing.B) {
			var outages, withdrawals []time.Duration
			failed := 0
			for i := 0; i < *trials; i++ {
				w, last, f := bgpFailoverTrial(b, bfd, i)
				outages = append(outages, last)
				withdrawals = append(withdrawals, w)
				failed += f
			}
			sort.Slice(outages, func(i, j int) bool { return outages[i] < outages[j] })
			sort.Slice(withdrawals, func(i, j int) bool { return withdrawals[i] < withdrawals[j] })
			fmt.Fprintf(os.Stdout, "failover mode=bgp detection=%s scenario=node-loss trials=%d median_ms=%d p95_ms=%d max_ms=%d withdraw_median_ms=%d failed_requests=%d\n",
				detection, len(outages), failoverbench.Percentile(outages, 50).Milliseconds(), failoverbench.Percentile(outages, 95).Milliseconds(), outages[len(outages)-1].Milliseconds(),
				failoverbench.Percentile(withdrawals, 50).Milliseconds(), failed)
		})
	}
}

// bgpFailoverTrial is one trial of BenchmarkFailoverBGP (and of the
// peers' BGP line for vipctl), a sub-benchmark so its lab is torn down
// before the next: a bgp pool's Cluster address announced by three nodes
// (two racks) to the router, node b1 lost. It returns how long the
// withdrawal took, when the last connection failed and how many did.
func bgpFailoverTrial(b *testing.B, bfd bool, i int) (withdrawn, lastFail time.Duration, failed int) {
	b.Run(fmt.Sprintf("trial-%d", i), func(b *testing.B) {
		bl := startBGPLab(b, bfd)
		all := bl.announceEverywhere(b, bgpClusterVIP)
		if bfd {
			// Sessions up before the fault, or the trial measures the
			// hold timer (bgpLab.waitBFDUp).
			b.Logf("BFD up %s after the routes", bl.waitBFDUp(b, 3).Round(time.Millisecond))
		}
		withdrawn, lastFail, failed = bl.loseNode(b, bgpClusterVIP, bl.lc.ByName["b1"].Host.LinkDown, all[:2])
	})
	return withdrawn, lastFail, failed
}
