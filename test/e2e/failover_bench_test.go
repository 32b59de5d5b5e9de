package e2e

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

var trials = flag.Int("trials", 20, "failover benchmark: trials per profile and scenario")

// BenchmarkFailover measures, from a client in its own namespace opening a
// new connection every 10 ms (250 ms timeout), how long the API VIP is
// unreachable when its holder fails, from the fault to the first good
// answer from the new holder. One line per profile and scenario:
//
//	failover profile=<p> scenario=<s> trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=F
//
// Run with `make bench-failover [TRIALS=N]`. The targets live in
// docs/benchmarks.md, not here: this prints, it does not judge.
func BenchmarkFailover(b *testing.B) {
	for _, profile := range []string{"default", "fast"} {
		for _, scenario := range []string{"node-loss", "keepalived-kill", "planned"} {
			b.Run(profile+"/"+scenario, func(b *testing.B) {
				var outages []time.Duration
				failed := 0
				for i := 0; i < *trials; i++ {
					d, f := failoverTrial(b, profile, scenario, i)
					outages = append(outages, d)
					failed += f
				}
				sort.Slice(outages, func(i, j int) bool { return outages[i] < outages[j] })
				fmt.Fprintf(os.Stdout, "failover profile=%s scenario=%s trials=%d median_ms=%d p95_ms=%d max_ms=%d failed_requests=%d\n",
					profile, scenario, len(outages), percentile(outages, 50).Milliseconds(), percentile(outages, 95).Milliseconds(), outages[len(outages)-1].Milliseconds(), failed)
			})
		}
	}
}

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

// failoverTrial builds a fresh three-master cluster (so trials share no
// state), injects one fault into the holder and returns the outage and the
// number of failed requests. Each trial is a sub-benchmark so its lab is
// torn down before the next starts.
func failoverTrial(b *testing.B, profile, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		lc := startCluster(t, clusterYAML(profile, "unicast", ""), masters(3))
		for _, n := range lc.nodes {
			startEcho(t, n, "0.0.0.0:8080")
		}
		holder := lc.settled(apiVIP)
		w := lc.watch("http://" + apiVIP + ":8080/")
		waitFor(t, 10*time.Second, "answers", func() bool { return w.answers() > 20 })
		old := lc.byName[holder]
		fault := time.Now()
		switch scenario {
		case "node-loss":
			old.host.LinkDown()
		case "keepalived-kill":
			old.crashKeepalived(t)
		case "planned":
			if err := runtimecfg.SetDrain(old.target, true); err != nil {
				t.Fatal(err)
			}
			lc.waitHolder(apiVIP, 30*time.Second, func(n string) bool { return n != holder })
			time.Sleep(500 * time.Millisecond)
			old.keepalived.Stop()
		}
		first := w.firstFrom(t, func(node string) bool { return node != holder }, fault, 30*time.Second)
		time.Sleep(300 * time.Millisecond)
		failed = w.stop()
		outage = first.Sub(fault)
		if scenario == "planned" {
			// Make-before-break: the old holder serves until the new one
			// has the VIP, so the outage is the longest run of failures,
			// not how long the handover takes.
			outage = w.longestGap
		}
	})
	return outage, failed
}

// watcher polls url every 10 ms and remembers who answered when.
type watcher struct {
	mu         sync.Mutex
	seen       []sighting
	fails      int
	longestGap time.Duration
	failStart  time.Time
	stopCh     chan struct{}
	done       chan struct{}
}

type sighting struct {
	at   time.Time
	node string
}

func (lc *labCluster) watch(url string) *watcher {
	w := &watcher{stopCh: make(chan struct{}), done: make(chan struct{})}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: lc.client.DialContext}
	c := &http.Client{Transport: tr, Timeout: 250 * time.Millisecond}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stopCh:
				return
			case <-tick.C:
			}
			resp, err := c.Get(url)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				if w.failStart.IsZero() {
					w.failStart = now
				}
				w.fails++
			} else {
				if !w.failStart.IsZero() {
					if gap := now.Sub(w.failStart); gap > w.longestGap {
						w.longestGap = gap
					}
					w.failStart = time.Time{}
				}
				w.seen = append(w.seen, sighting{at: now, node: strings.TrimSpace(string(body))})
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watcher) answers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// firstFrom waits for the first answer after since from a node matching ok.
func (w *watcher) firstFrom(t testing.TB, ok func(string) bool, since time.Time, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		idx := slices.IndexFunc(w.seen, func(s sighting) bool { return s.at.After(since) && ok(s.node) })
		var at time.Time
		if idx >= 0 {
			at = w.seen[idx].at
		}
		w.mu.Unlock()
		if idx >= 0 {
			return at
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no answer from a new holder within %s", timeout)
	return time.Time{}
}

func (w *watcher) stop() int {
	close(w.stopCh)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fails
}

var steadyFor = flag.Duration("steady", 10*time.Minute, "steady-state benchmark: how long to watch")

// BenchmarkSteadyState runs the fast profile (200 ms adverts) for -steady
// with both CPUs kept busy by burner processes and counts false failovers:
// VRRP state changes and client failures while nothing is wrong. Prints:
//
//	steady profile=fast minutes=M busy_cpus=2 false_failovers=F failed_requests=R
func BenchmarkSteadyState(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		lc := startCluster(b, clusterYAML("fast", "unicast", ""), masters(3))
		for _, n := range lc.nodes {
			startEcho(b, n, "0.0.0.0:8080")
		}
		holder := lc.settled(apiVIP)
		transitions := func() int {
			count := 0
			for _, n := range lc.nodes {
				data, _ := os.ReadFile(n.keepalived.Log)
				count += strings.Count(string(data), "Entering MASTER STATE") + strings.Count(string(data), "Entering BACKUP STATE") + strings.Count(string(data), "Entering FAULT STATE")
			}
			return count
		}
		before := transitions()
		// Burners live in the client namespace like every other process of
		// the lab; they only spin.
		for i := 0; i < 2; i++ {
			lc.client.Start(fmt.Sprintf("burner-%d", i), "sh", "-c", "while :; do :; done")
		}
		w := lc.watch("http://" + apiVIP + ":8080/")
		time.Sleep(*steadyFor)
		failed := w.stop()
		falseFailovers := transitions() - before
		if got := lc.holders(apiVIP); !slices.Equal(got, []string{holder}) {
			falseFailovers++ // the VIP moved even if the logs missed it
		}
		fmt.Fprintf(os.Stdout, "steady profile=fast minutes=%.0f busy_cpus=2 false_failovers=%d failed_requests=%d\n", steadyFor.Minutes(), falseFailovers, failed)
	})
}
