package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestVerdictsPassOverLogStreams(t *testing.T) {
	out := []string{
		"=== RUN   TestCluster/Roll\n",
		"    timeline_test.go:39: 14:18:01 endpoints of a: master-0\n",
		"    timeline_test.go:39: 14:18:01 endpoints of b: master-1\n",
		"    timeline_test.go:39: 14:18:02 endpoints of c: master-2\n",
		"    cluster_test.go:560: http://198.51.100.1/ through the roll: 0 of 1067 requests failed\n",
		"    cluster_test.go:560: http://198.51.100.129/ through the roll: 1 of 1067 requests failed\n",
		"    cluster_test.go:560: http://198.51.100.129/ through the roll: 1 requests failed; want none:\n",
		"        14:20:01.5 connection refused\n",
		"    cluster_test.go:560: http://198.51.100.130/ through the roll: 0 of 1067 requests failed\n",
		"    poll.go:120: no answer\n",
		"    cluster_test.go:571: \n",
		"        --- master-0 log\n",
		"    cluster_test.go:571: \n",
		"    cluster_test.go:571: \n",
		"    cluster_test.go:575: master-2's keepalived pod runs v0.1.0, want v0.2.0\n",
		"--- FAIL: TestCluster/Roll (210.51s)\n",
	}
	got := verdicts(out, 3)
	want := []string{
		"cluster_test.go:560: http://198.51.100.129/ through the roll: 1 requests failed; want none: | 14:20:01.5 connection refused",
		"poll.go:120: no answer",
		"cluster_test.go:575: master-2's keepalived pod runs v0.1.0, want v0.2.0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("verdicts = %q, want %q", got, want)
	}
}

// TestVerdictsShowWhatFollowsManyFailedAddresses: a roll that failed
// ten addresses reports each from one place; the lines after them (who
// refused, who lagged) are picked too, and all are shown in the order
// the test reported them, so CI's cut, which keeps the last lines,
// keeps those.
func TestVerdictsShowWhatFollowsManyFailedAddresses(t *testing.T) {
	var out []string
	for i := range 10 {
		out = append(out, fmt.Sprintf("    cluster_test.go:828: http://198.51.100.%d/: 3 requests failed; want none:\n", 128+i))
	}
	out = append(out,
		"    cluster_test.go:854: resets the client got (want none to fail): from master-2\n",
		"    cluster_test.go:858: kube-proxy lags (want none): master-2 from 06:16:39\n")
	got := verdicts(out, 5)
	want := []string{
		"cluster_test.go:828: http://198.51.100.128/: 3 requests failed; want none:",
		"cluster_test.go:828: http://198.51.100.129/: 3 requests failed; want none:",
		"cluster_test.go:828: http://198.51.100.130/: 3 requests failed; want none:",
		"cluster_test.go:854: resets the client got (want none to fail): from master-2",
		"cluster_test.go:858: kube-proxy lags (want none): master-2 from 06:16:39",
	}
	if !slices.Equal(got, want) {
		t.Errorf("verdicts = %q, want %q", got, want)
	}
}

func TestVerdictsFallBackToFirstLines(t *testing.T) {
	out := []string{
		"    x_test.go:1: a\n", "    x_test.go:1: b\n", "    x_test.go:1: c\n", "    x_test.go:1: d\n",
	}
	got := verdicts(out, 2)
	if want := []string{"x_test.go:1: a", "x_test.go:1: b"}; !slices.Equal(got, want) {
		t.Errorf("verdicts = %q, want %q", got, want)
	}
}

func TestTimesNameEveryTestWithItsSpan(t *testing.T) {
	in := strings.Join([]string{
		`{"Time":"2026-12-01T06:00:00Z","Action":"run","Package":"p","Test":"TestA"}`,
		`{"Time":"2026-12-01T06:00:10Z","Action":"pass","Package":"p","Test":"TestA/sub","Elapsed":4}`,
		`{"Time":"2026-12-01T06:00:12Z","Action":"pass","Package":"p","Test":"TestA","Elapsed":12}`,
		`{"Time":"2026-12-01T06:00:20Z","Action":"fail","Package":"p","Test":"TestB","Elapsed":3.5}`,
	}, "\n")
	r := &report{out: io.Discard, buffered: map[testKey][]string{}}
	for _, l := range strings.Split(in, "\n") {
		r.line(l)
	}
	path := filepath.Join(t.TempDir(), "times.tsv")
	if err := r.writeTimes(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "package\ttest\tbegan_s\tended_s\telapsed_s\n" +
		"p\tTestA/sub\t6.0\t10.0\t4.0\n" +
		"p\tTestA\t0.0\t12.0\t12.0\n" +
		"p\tTestB\t16.5\t20.0\t3.5\n"
	if string(got) != want {
		t.Errorf("times file:\n%s\nwant:\n%s", got, want)
	}
}

func TestSummaryEndsWithTheFailedSubtestsVerdicts(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestC/Roll","Output":"    c_test.go:9: 1 request failed, want none\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC/Roll","Elapsed":3}`,
		`{"Action":"output","Package":"p","Test":"TestC/Next","Output":"    c_test.go:12: passed\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestC/Next","Elapsed":1}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:5: cluster serving\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC","Elapsed":5}`,
		`{"Action":"fail","Package":"p","Elapsed":6}`,
	}, "\n")
	var out strings.Builder
	r := &report{out: &out, buffered: map[testKey][]string{}}
	for _, l := range strings.Split(in, "\n") {
		r.line(l)
	}
	r.summary(0)
	_, tail, ok := strings.Cut(out.String(), "testreport: FAILED\n")
	if !ok {
		t.Fatalf("no FAILED section in:\n%s", out.String())
	}
	// The package first: CI's cut keeps the verdicts at the end.
	want := "  FAIL package p\n" +
		"  --- FAIL p TestC (5.0s)\n" +
		"  --- FAIL p TestC/Roll (3.0s)\n" +
		"        c_test.go:9: 1 request failed, want none\n"
	if tail != want {
		t.Errorf("FAILED section:\n%s\nwant:\n%s", tail, want)
	}
}

// TestReadLinesKeepsEveryStreamsLinesWhole writes long lines (past
// PIPE_BUF, whose writes into one pipe could tear) into two pipes at once
// and wants every line whole, each stream's in its order.
func TestReadLinesKeepsEveryStreamsLinesWhole(t *testing.T) {
	const n = 200
	long := strings.Repeat("x", 9000)
	var opens []func() (io.ReadCloser, error)
	for _, name := range []string{"a", "b"} {
		pr, pw := io.Pipe()
		go func() {
			for i := range n {
				if _, err := io.WriteString(pw, name+strconv.Itoa(i)+" "+long+"\n"); err != nil {
					return
				}
			}
			pw.Close()
		}()
		opens = append(opens, func() (io.ReadCloser, error) { return pr, nil })
	}
	next := map[string]int{}
	err := readLines(opens, func(l string) {
		name, rest, _ := strings.Cut(l, " ")
		if rest != long {
			t.Fatalf("line %s torn: %d bytes after its name, want %d", name, len(rest), len(long))
		}
		s := name[:1]
		if want := s + strconv.Itoa(next[s]); name != want {
			t.Fatalf("line %s, want %s", name, want)
		}
		next[s]++
	})
	if err != nil {
		t.Fatal(err)
	}
	if next["a"] != n || next["b"] != n {
		t.Errorf("lines read: %v, want %d of each", next, n)
	}
}

func TestReadLinesReportsAStreamThatCannotOpen(t *testing.T) {
	opens := []func() (io.ReadCloser, error){
		func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("a\n")), nil },
		func() (io.ReadCloser, error) { return os.Open(filepath.Join(t.TempDir(), "missing")) },
	}
	var got []string
	err := readLines(opens, func(l string) { got = append(got, l) })
	if err == nil || !os.IsNotExist(err) {
		t.Errorf("err = %v, want the missing file's", err)
	}
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("lines = %q, want the other stream's", got)
	}
}
