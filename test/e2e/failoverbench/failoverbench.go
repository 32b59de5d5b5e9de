// Package failoverbench is what the failover benchmarks of every lab
// share (the namespace and kubelet labs in test/e2e, the cluster lab in
// test/e2e/cluster): the flags that choose the profiles and scenarios,
// and the result line with its percentiles. Importing it gives a test
// binary those flags, so `make bench-failover` passes the same BENCH_ARGS
// to every suite.
package failoverbench

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

var (
	// Profiles are the VRRP profiles to run.
	Profiles = flag.String("profiles", "default,fast", "failover benchmark: the profiles to run, comma-separated")
	// Scenarios are the scenarios to run, every one when empty.
	Scenarios = flag.String("scenarios", "", "failover benchmark: only these scenarios, comma-separated (empty: all)")
	// Advert overrides the profile's advertInterval in the namespace lab's
	// benchmarks; the other labs accept it and keep their profile's.
	Advert = flag.String("advert", "", "failover and steady-state benchmarks: advertInterval overriding the profile's (the curve of outage and false failovers against the advert)")
)

// Selected is whether name is in the comma-separated list, or the list is
// empty.
func Selected(list, name string) bool {
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

// Cases runs trial n times for every profile of -profiles and scenario
// of -scenarios and prints one line per case; lab ("" for the namespace
// lab) names the lab in the line, as lab=NAME after "failover", and
// advert is the advert interval a profile runs with in that lab. n = 0
// runs and prints nothing (a make target's TRIALS=0 leaves a lab out).
func Cases(b *testing.B, lab string, scenarios []string, n int, advert func(profile string) string, trial func(b *testing.B, profile, scenario string, i int) (time.Duration, int)) {
	if n < 1 {
		return
	}
	prefix := "failover"
	if lab != "" {
		prefix += " lab=" + lab
	}
	for _, profile := range []string{"default", "fast"} {
		if !Selected(*Profiles, profile) {
			continue
		}
		for _, scenario := range scenarios {
			if !Selected(*Scenarios, scenario) {
				continue
			}
			b.Run(profile+"/"+scenario, func(b *testing.B) {
				outages, failed := RunTrials(n, func(i int) (time.Duration, int) { return trial(b, profile, scenario, i) })
				Print(prefix, profile, advert(profile), scenario, outages, failed)
			})
		}
	}
}

// AdvertOf is the advert interval a cluster file runs with, as its
// defaults set it: the advert a benchmark line names.
func AdvertOf(clusterYAML string) string {
	c, err := v1alpha1.Parse([]byte(clusterYAML))
	if err != nil {
		return "invalid: " + err.Error()
	}
	return c.Spec.VRRP.Advert().String()
}

// RunTrials runs trial n times and returns each trial's outage and the
// failed requests of all of them.
func RunTrials(n int, trial func(i int) (time.Duration, int)) ([]time.Duration, int) {
	var outages []time.Duration
	failed := 0
	for i := 0; i < n; i++ {
		d, f := trial(i)
		outages = append(outages, d)
		failed += f
	}
	return outages, failed
}

// Print prints one benchmark line: the outages' median, p95 and maximum,
// and the failed requests of every trial.
func Print(prefix, profile, advert, scenario string, outages []time.Duration, failed int) {
	_, _ = fmt.Fprintf(os.Stdout, "%s profile=%s advert=%s scenario=%s %s\n", prefix, profile, advert, scenario, OutageFields(outages, failed))
}

// OutageFields is the end of a benchmark line: the trials' count, their
// outages' median, p95 and maximum, and the failed requests of all.
func OutageFields(outages []time.Duration, failed int) string {
	sorted := slices.Clone(outages)
	slices.Sort(sorted)
	return fmt.Sprintf("trials=%d median_ms=%d p95_ms=%d max_ms=%d failed_requests=%d",
		len(sorted), Percentile(sorted, 50).Milliseconds(), Percentile(sorted, 95).Milliseconds(), sorted[len(sorted)-1].Milliseconds(), failed)
}

// PercentileMS is Percentile in milliseconds, -1 for no durations.
func PercentileMS(sorted []time.Duration, p int) int64 {
	if len(sorted) == 0 {
		return -1
	}
	return Percentile(sorted, p).Milliseconds()
}

// Percentile is the p-th percentile of sorted (nearest rank).
func Percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}
