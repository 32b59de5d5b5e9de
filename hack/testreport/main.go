// Command testreport reads `go test -json` and prints what `go test` would
// print, then a short report: the failed tests with their first error
// lines and the slowest tests. CI keeps only the end of a run's output, and
// a failing e2e package prints thousands of lines of daemon logs before
// its verdict; the report puts the test names and causes where they are
// read, and the times a CI budget is cut by.
//
//	go test -json ./... 2>&1 | go run ./hack/testreport [-v] [-slowest N]
//	go run ./hack/testreport [flags] STREAM...
//
// Given files (FIFOs: hack/test.sh runs suites side by side, each into
// one of its own), it reads them all at once and takes whole lines from
// each: go test processes writing into one pipe could tear each other's
// long lines, whose writes are not atomic past PIPE_BUF.
//
// It exits 1 when a test, a package or the build failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// event is one line of cmd/test2json's output.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Time       time.Time
	Output     string
	ImportPath string
}

type testKey struct{ pkg, test string }

type result struct {
	key     testKey
	elapsed time.Duration
	// ended is when the test ended, from go test's own clock.
	ended time.Time
	// errors are the test's own report lines (file.go:NN: ...), the
	// first of which usually names the cause.
	errors []string
}

// errLine matches a line a test reports through t.Log, t.Error or
// t.Fatal, and captures where it was reported from and what it says.
var errLine = regexp.MustCompile(`^\s+(\S+\.go:\d+): (.*)`)

// verdicts picks up to n of a failed test's report lines that most likely
// name its cause. go test does not tell t.Error from t.Log, so it ranks
// them: first the lines that say what they want (this project's errors
// end "..., want ..."), two from each place before any third (a roll
// that fails many addresses reports each from one place, and the lines
// after them, who answered and who lagged, would never be shown; CI's
// cut keeps only the last few), then the lines from a place that reported at most
// twice (a place that reports more is a log stream: a timeline, a
// daemon's log tail; a line with nothing after its place heads a
// multi-line dump). When neither is found the first report lines are
// taken. The lines picked are shown in the order the test reported them.
func verdicts(output []string, n int) []string {
	type reported struct{ place, line string }
	var all []reported
	count := map[string]int{}
	for _, o := range output {
		if m := errLine.FindStringSubmatch(o); m != nil {
			count[m[1]]++
			all = append(all, reported{m[1], strings.TrimSpace(o)})
			continue
		}
		// A multi-line report's first two continuation lines, after
		// its first line: "want none:" is followed by what failed.
		if last := len(all) - 1; last >= 0 && strings.HasPrefix(o, "        ") && strings.Count(all[last].line, " | ") < 2 {
			all[last].line += " | " + strings.TrimSpace(o)
		}
	}
	// chosen are the picked lines' indexes in all: they are shown in
	// the order the test reported them.
	var chosen []int
	pick := func(ok func(reported) bool) {
		for i, r := range all {
			if len(chosen) < n && !slices.ContainsFunc(chosen, func(j int) bool { return all[j].line == r.line }) && ok(r) {
				chosen = append(chosen, i)
			}
		}
	}
	picked := map[string]int{}
	pick(func(r reported) bool {
		if !wants.MatchString(r.line) || picked[r.place] >= 2 {
			return false
		}
		picked[r.place]++
		return true
	})
	pick(func(r reported) bool { return wants.MatchString(r.line) })
	pick(func(r reported) bool {
		return count[r.place] <= 2 && !strings.HasSuffix(r.line, ":") && !strings.Contains(r.line, ": | ")
	})
	pick(func(reported) bool { return true })
	slices.Sort(chosen)
	out := make([]string, len(chosen))
	for i, j := range chosen {
		out[i] = all[j].line
	}
	return out
}

// wants matches an error line that says what it wants.
var wants = regexp.MustCompile(`\bwant\b`)

type report struct {
	out     io.Writer
	verbose bool
	// buffered holds each running test's output until it ends: shown when
	// it fails, dropped when it passes (go test's non-verbose mode).
	buffered map[testKey][]string
	failed   []result
	finished []result
	// all is every test and subtest that ended, in the order they ended.
	all     []result
	badPkgs []string
	build   bool
}

func (r *report) line(l string) {
	var e event
	if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &e) != nil {
		// go vet and build output, or anything written around go test.
		r.printf("%s\n", l)
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		r.printf("%s", e.Output)
	case "build-fail":
		r.build = true
	case "output":
		if e.Test == "" || r.verbose {
			r.printf("%s", e.Output)
		}
		if e.Test != "" {
			r.buffered[k] = append(r.buffered[k], e.Output)
		}
	case "pass", "skip", "fail":
		if e.Test == "" {
			if e.Action == "fail" {
				r.badPkgs = append(r.badPkgs, e.Package)
			}
			return
		}
		res := result{key: k, elapsed: time.Duration(e.Elapsed * float64(time.Second)), ended: e.Time}
		r.all = append(r.all, res)
		if e.Action == "fail" {
			if !r.verbose {
				for _, o := range r.buffered[k] {
					r.printf("%s", o)
				}
			}
			res.errors = verdicts(r.buffered[k], 8)
			r.failed = append(r.failed, res)
		}
		if !strings.Contains(e.Test, "/") {
			r.finished = append(r.finished, res)
		}
		delete(r.buffered, k)
	}
}

// printf writes to the report's output; a closed stdout leaves nothing
// to report to.
func (r *report) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.out, format, args...)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (r *report) summary(slowest int) {
	sort.SliceStable(r.finished, func(i, j int) bool { return r.finished[i].elapsed > r.finished[j].elapsed })
	if len(r.finished) > slowest {
		r.finished = r.finished[:slowest]
	}
	r.printf("\ntestreport: slowest tests\n")
	for _, t := range r.finished {
		r.printf("  %7.1fs %s %s\n", t.elapsed.Seconds(), t.key.pkg, t.key.test)
	}
	// Tests still buffered when the stream ended were running when a
	// package timed out or crashed: they are the suspects.
	for k := range r.buffered {
		if k.test != "" && !strings.Contains(k.test, "/") {
			r.printf("testreport: unfinished: %s %s\n", k.pkg, k.test)
		}
	}
	if len(r.failed) == 0 && len(r.badPkgs) == 0 && !r.build {
		r.printf("testreport: every test passed\n")
		return
	}
	r.printf("testreport: FAILED\n")
	// The packages first: CI's cut keeps the last few lines, which
	// the deepest failed test's verdicts should fill.
	for _, p := range r.badPkgs {
		r.printf("  FAIL package %s\n", p)
	}
	if r.build {
		r.printf("  a package did not build\n")
	}
	// A test fails when a subtest does, after it: its own lines are then
	// mostly the logs it printed along the way, and it would end the
	// report, where CI's cut keeps the last lines (stop 71's CI showed
	// TestCluster's logs and cut RollbackToPreviousRelease's verdicts).
	// So parents come first, named alone, and the deepest subtests last.
	slices.SortStableFunc(r.failed, func(a, b result) int {
		return strings.Count(a.key.test, "/") - strings.Count(b.key.test, "/")
	})
	for _, t := range r.failed {
		r.printf("  --- FAIL %s %s (%.1fs)\n", t.key.pkg, t.key.test, t.elapsed.Seconds())
		if r.subtestFailed(t.key) {
			continue
		}
		for _, e := range t.errors {
			r.printf("        %s\n", shorten(e, 400))
		}
	}
}

// subtestFailed tells whether a subtest of k failed: its verdicts are
// listed under it.
func (r *report) subtestFailed(k testKey) bool {
	return slices.ContainsFunc(r.failed, func(f result) bool {
		return f.key.pkg == k.pkg && strings.HasPrefix(f.key.test, k.test+"/")
	})
}

// writeTimes writes every test's and subtest's time, one line each:
// package, test, when it began and ended (seconds after the first test
// began) and how long it took. Tab-separated, in the order the tests
// ended, so that where a run's minutes went can be read after it:
//
//	sort -t$'\t' -k5 -rn bin/test-times.tsv | head
func (r *report) writeTimes(path string) error {
	var first time.Time
	for _, t := range r.all {
		if began := t.ended.Add(-t.elapsed); first.IsZero() || began.Before(first) {
			first = began
		}
	}
	var b strings.Builder
	b.WriteString("package\ttest\tbegan_s\tended_s\telapsed_s\n")
	for _, t := range r.all {
		fmt.Fprintf(&b, "%s\t%s\t%.1f\t%.1f\t%.1f\n", t.key.pkg, t.key.test,
			t.ended.Add(-t.elapsed).Sub(first).Seconds(), t.ended.Sub(first).Seconds(), t.elapsed.Seconds())
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readLines reads every stream at once, each opened in its own goroutine
// (a FIFO's open waits for its writer, which may start late), and hands
// their lines, each whole, to line, one at a time. It returns when every
// stream has ended, with the first error met.
func readLines(opens []func() (io.ReadCloser, error), line func(string)) error {
	lines := make(chan string)
	errs := make(chan error, len(opens))
	for _, open := range opens {
		go func() {
			f, err := open()
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = f.Close() }()
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
			errs <- sc.Err()
		}()
	}
	var first error
	for left := len(opens); left > 0; {
		select {
		case l := <-lines:
			line(l)
		case err := <-errs:
			left--
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func main() {
	verbose := flag.Bool("v", false, "print every test's output as it comes, as go test -v does")
	slowest := flag.Int("slowest", 12, "how many of the slowest tests to list")
	times := flag.String("times", "", "write every test's and subtest's time to this file (tab-separated)")
	flag.Parse()
	r := &report{out: os.Stdout, verbose: *verbose, buffered: map[testKey][]string{}}
	opens := []func() (io.ReadCloser, error){func() (io.ReadCloser, error) { return io.NopCloser(os.Stdin), nil }}
	if flag.NArg() > 0 {
		opens = nil
		for _, name := range flag.Args() {
			opens = append(opens, func() (io.ReadCloser, error) { return os.Open(name) })
		}
	}
	if err := readLines(opens, r.line); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	r.summary(*slowest)
	if *times != "" {
		if err := r.writeTimes(*times); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
		}
	}
	if len(r.failed) > 0 || len(r.badPkgs) > 0 || r.build {
		os.Exit(1)
	}
}
