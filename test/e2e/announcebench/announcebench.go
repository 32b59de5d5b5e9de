// Package announcebench is what the announce benchmarks of the namespace
// lab (BenchmarkAnnounce, test/e2e) and the kubelet lab
// (BenchmarkAnnounceKubelet, test/e2e/kubelet) share: the two announce
// modes they compare, a trial's sample, the -announce-faults flag and
// the result lines. Importing it gives a test binary that flag.
package announcebench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
)

// Faults are the faults to run, every one when empty.
var Faults = flag.String("announce-faults", "", "BenchmarkAnnounce, BenchmarkAnnounceKubelet: only these faults, comma-separated (empty: all)")

// Modes are the two ways a vrrp pool's Service addresses get on the
// holder (v1alpha1.ServicePool.Announce), in the order lines are printed.
var Modes = []string{v1alpha1.AnnounceKeepalived, v1alpha1.AnnounceSidecar}

// Sample is one trial's result for one polled address.
type Sample struct {
	Outage time.Duration
	Failed int
	// Extra is what the fault's line reports besides (the API's return
	// for cold-start-api-down).
	Extra time.Duration
}

// Case is what a line measures: the lab, the mode, the fault and the
// address family ("" in an unsettled count: every family).
type Case struct{ Lab, Mode, Fault, Family string }

// ModeOrder is the modes of trial i: alternated, so that the machine's
// load falls on both alike.
func ModeOrder(i int) []string {
	modes := slices.Clone(Modes)
	if i%2 == 1 {
		slices.Reverse(modes)
	}
	return modes
}

// PrintUptime prints the machine's load as a line of the benchmark's
// output: the numbers mean little without it on a shared machine.
func PrintUptime() {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		out = []byte(err.Error())
	}
	fmt.Printf("announce uptime=%q at=%s\n", strings.TrimSpace(string(out)), time.Now().UTC().Format(time.RFC3339))
}

// LoadAverage is the machine's load, for each trial's log line.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	return "load " + strings.Join(strings.Fields(string(data))[:3], " ")
}

// Print prints one line per case, in the order of faults, then Modes,
// then family; unsettled counts, per lab, mode and fault, the trials
// whose lab never settled. profile is the VRRP profile the lab ran;
// extra, when set, adds the lab's own fields to a case's line.
func Print(results map[Case][]Sample, unsettled map[Case]int, faults []string, profile string, extra func(Case) string) {
	cases := make([]Case, 0, len(results))
	for c := range results {
		cases = append(cases, c)
	}
	for c := range unsettled {
		measured := false
		for r := range results {
			measured = measured || (r.Lab == c.Lab && r.Mode == c.Mode && r.Fault == c.Fault)
		}
		if !measured { // every trial unsettled: a line that says so
			cases = append(cases, c)
		}
	}
	sort.Slice(cases, func(i, j int) bool {
		a, b := cases[i], cases[j]
		if a.Fault != b.Fault {
			return slices.Index(faults, a.Fault) < slices.Index(faults, b.Fault)
		}
		if a.Mode != b.Mode {
			return slices.Index(Modes, a.Mode) < slices.Index(Modes, b.Mode)
		}
		return a.Family < b.Family
	})
	for _, c := range cases {
		samples := results[c]
		var outages, extras []time.Duration
		failed := 0
		for _, s := range samples {
			outages = append(outages, s.Outage)
			extras = append(extras, s.Extra)
			failed += s.Failed
		}
		slices.Sort(outages)
		slices.Sort(extras)
		line := fmt.Sprintf("announce lab=%s profile=%s fault=%s mode=%s family=%s trials=%d median_ms=%d p95_ms=%d max_ms=%d failed_requests=%d",
			c.Lab, profile, c.Fault, c.Mode, c.Family, len(samples), failoverbench.PercentileMS(outages, 50), failoverbench.PercentileMS(outages, 95), failoverbench.PercentileMS(outages, 100), failed)
		if n := unsettled[Case{Lab: c.Lab, Mode: c.Mode, Fault: c.Fault}]; n > 0 {
			line += fmt.Sprintf(" unsettled_trials=%d", n)
		}
		if extra != nil {
			line += extra(c)
		}
		if c.Fault == "cold-start-api-down" {
			line += fmt.Sprintf(" api_back_ms=%d", failoverbench.PercentileMS(extras, 50))
		}
		fmt.Println(line)
	}
}
