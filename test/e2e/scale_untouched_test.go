package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
)

// untouchedPoll is BenchmarkScale's client of the untouched VIPs while
// Services are added: a labprobe poller in the client namespace, so that
// a stall of the benchmark process (three sidecars' informer caches, the
// allocator, the apiserver's clients) delays no request, and a check of
// that process's own stalls, to compare with.
type untouchedPoll struct {
	urls    []string
	poll    *lab.ProbeProc
	started time.Time
	cancel  context.CancelFunc
	watched chan struct{}
	mu      sync.Mutex
	stalls  []probe.Record // the benchmark process's
}

// untouchedResult sums up the polling for the case=untouched line.
type untouchedResult struct {
	requests, failed, noHandshake int
	// bursts of failures (burstGap); addresses any node lost meanwhile;
	// answers of a VIP from another node than its answer before.
	bursts, removals, moves               int
	pollerStalls, echoStalls, benchStalls int
}

// burstGap: failures that started within it of the one before belong to
// one burst, whose neighbourhood is searched for a cause.
const burstGap = time.Second

// pollUntouched polls *scaleUntouched loaded VIPs, spread over the list
// (and so over the instances), every 50 ms each, and waits until each
// has answered five times.
func (s *scaleLab) pollUntouched(b *testing.B) *untouchedPoll {
	u := &untouchedPoll{started: time.Now(), watched: make(chan struct{})}
	for i := 0; i < *scaleUntouched; i++ {
		vip := s.vips[i*len(s.vips) / *scaleUntouched]
		u.urls = append(u.urls, fmt.Sprintf("http://[%s]:%d/", vip, scalePort))
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel = cancel
	go func() {
		defer close(u.watched)
		probe.WatchStalls(ctx, probe.StallEvery, probe.StallThreshold, func(r probe.Record) {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.stalls = append(u.stalls, r)
		})
	}()
	b.Cleanup(func() { cancel(); <-u.watched })
	u.poll = lab.StartPollProcess(b, s.probeBin, s.kc.Client, u.urls, 50*time.Millisecond)
	lab.WaitFor(b, 30*time.Second, "every polled VIP answers", func() bool {
		answered := probe.Answered(u.poll.Records(b))
		for _, url := range u.urls {
			if answered[url] < 5 {
				return false
			}
		}
		return true
	})
	return u
}

// stop ends the polling and sums it up. It logs every failed request
// and, for each burst of failures, what happened within a second of it:
// addresses leaving any node's interface (a real cause), and stalls of
// the poller, the echo servers and the benchmark process (the machine
// or a process not running).
func (u *untouchedPoll) stop(b *testing.B, s *scaleLab) untouchedResult {
	records := u.poll.Stop(b)
	u.cancel()
	<-u.watched
	end := time.Now()
	var r untouchedResult
	var failed, pollerStalls []probe.Record
	answers := map[string][]probe.Record{}
	for _, rec := range records {
		switch rec.Kind {
		case probe.KindStall:
			pollerStalls = append(pollerStalls, rec)
		case probe.KindRequest:
			r.requests++
			if rec.OK {
				answers[rec.URL] = append(answers[rec.URL], rec)
				continue
			}
			// Without a handshake the address was not reachable; after
			// it, the answer took longer than the poller waits.
			r.failed++
			if !rec.Handshake {
				r.noHandshake++
			}
			failed = append(failed, rec)
			b.Logf("untouched VIP: %s", rec.Err)
		}
	}
	for _, as := range answers {
		sort.Slice(as, func(i, j int) bool { return as[i].Start.Before(as[j].Start) })
		for i := 1; i < len(as); i++ {
			if as[i].Body != as[i-1].Body {
				r.moves++
			}
		}
	}
	echoStalls := map[string][]probe.Record{}
	for _, e := range s.echoes {
		echoStalls[e.Name] = probe.Stalls(e.Records(b), u.started, end)
		r.echoStalls += len(echoStalls[e.Name])
	}
	u.mu.Lock()
	benchStalls := u.stalls
	u.mu.Unlock()
	r.pollerStalls, r.benchStalls = len(pollerStalls), len(benchStalls)
	r.removals = len(s.added.removedBetween(u.started, end))
	if r.pollerStalls+r.echoStalls+r.benchStalls > 0 {
		b.Logf("untouched: stalls while polling: poller %s, echo %s, benchmark %s",
			stallList(pollerStalls), echoStallList(s.echoes, echoStalls, u.started, end), stallList(benchStalls))
	}

	for _, burst := range failureBursts(failed) {
		r.bursts++
		from, to := burst[0].Start, burst[0].Start
		vips, noHandshake := map[string]bool{}, 0
		for _, f := range burst {
			if answered := f.Start.Add(f.Took); answered.After(to) {
				to = answered
			}
			vips[f.URL] = true
			if !f.Handshake {
				noHandshake++
			}
		}
		near0, near1 := from.Add(-time.Second), to.Add(time.Second)
		b.Logf("untouched: failure burst %d, %s to %s (%d ms): %d requests failed on %d of %d VIPs, %d without a handshake; "+
			"within 1 s: address removals: %s; stalls: poller %s, echo %s, benchmark %s",
			r.bursts, from.Format("15:04:05.000"), to.Format("15:04:05.000"), to.Sub(from).Milliseconds(),
			len(burst), len(vips), len(u.urls), noHandshake,
			removalList(s.added.removedBetween(near0, near1), u.urls),
			stallList(probe.Stalls(pollerStalls, near0, near1)), echoStallList(s.echoes, echoStalls, near0, near1),
			stallList(probe.Stalls(benchStalls, near0, near1)))
	}
	return r
}

// failureBursts groups failed requests into bursts, by start: a burst
// ends where the next failure started more than burstGap after the one
// before it.
func failureBursts(failed []probe.Record) [][]probe.Record {
	failed = slices.Clone(failed)
	sort.Slice(failed, func(i, j int) bool { return failed[i].Start.Before(failed[j].Start) })
	var out [][]probe.Record
	for i, f := range failed {
		if i == 0 || f.Start.Sub(failed[i-1].Start) > burstGap {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], f)
	}
	return out
}

// addrRemoval is an address a node lost.
type addrRemoval struct {
	addr netip.Addr
	addrEvent
}

// removedBetween lists the addresses any node lost in [from, to], by
// time. The times are when the benchmark process read the notification:
// late by as much as that process stalled.
func (l *addrLog) removedBetween(from, to time.Time) []addrRemoval {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []addrRemoval
	for a, events := range l.removed {
		for _, e := range events {
			if !e.at.Before(from) && !e.at.After(to) {
				out = append(out, addrRemoval{addr: a, addrEvent: e})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// removalList shows the first removals, marking the polled addresses.
func removalList(removed []addrRemoval, polled []string) string {
	var out []string
	for i, r := range removed {
		if i == 10 {
			out = append(out, fmt.Sprintf("and %d more", len(removed)-i))
			break
		}
		mark := ""
		for _, url := range polled {
			if strings.Contains(url, "["+r.addr.String()+"]") {
				mark = " (polled)"
			}
		}
		out = append(out, fmt.Sprintf("%s lost %s%s at %s", r.node, r.addr, mark, r.at.Format("15:04:05.000")))
	}
	return noneIfEmpty(strings.Join(out, ", "))
}

// echoStallList shows the echo servers' stalls in [from, to], by server.
func echoStallList(echoes []*lab.ProbeProc, stalls map[string][]probe.Record, from, to time.Time) string {
	var out []string
	for _, e := range echoes {
		if st := probe.Stalls(stalls[e.Name], from, to); len(st) > 0 {
			out = append(out, e.Name+" "+stallList(st))
		}
	}
	return noneIfEmpty(strings.Join(out, ", "))
}

// stallList shows stalls as start+lag.
func stallList(stalls []probe.Record) string {
	var out []string
	for _, s := range stalls {
		out = append(out, fmt.Sprintf("%s+%dms", s.Start.Format("15:04:05.000"), s.Lag.Milliseconds()))
	}
	return noneIfEmpty(strings.Join(out, " "))
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func TestFailureBursts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms ...int) []probe.Record {
		var out []probe.Record
		for _, m := range ms {
			out = append(out, probe.Record{Kind: probe.KindRequest, Start: t0.Add(time.Duration(m) * time.Millisecond)})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		failed []probe.Record
		want   [][]probe.Record
	}{
		{name: "none"},
		{name: "one", failed: at(0), want: [][]probe.Record{at(0)}},
		{name: "a second apart is one burst", failed: at(0, 1000, 2000), want: [][]probe.Record{at(0, 1000, 2000)}},
		{name: "more than a second apart are two", failed: at(0, 50, 1051, 1100), want: [][]probe.Record{at(0, 50), at(1051, 1100)}},
		{name: "out of order", failed: at(1100, 0, 1051, 50), want: [][]probe.Record{at(0, 50), at(1051, 1100)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureBursts(tc.failed); !equalJSON(t, got, tc.want) {
				t.Errorf("failureBursts = %v; want %v", got, tc.want)
			}
		})
	}
}
