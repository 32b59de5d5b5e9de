package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestRefreshesGoOutTogether: 100 Service addresses added one by one over
// 40 s (as a bulk of Services arrives) are each announced at once, again
// GARPDelay later (full rounds), then refreshed (one advertisement) at
// least every GARPRefresh for GARPRefreshEarly refreshes, and after that
// every GARPRefreshSettled, not more often than every half of it. The
// refreshes go out together, so once they have settled the follower wakes
// about once a refresh period, not once per address.
func TestRefreshesGoOutTogether(t *testing.T) {
	start := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	announced := map[netip.Addr]announcement{}
	wanted := map[netip.Addr]bool{}
	last := map[netip.Addr]time.Time{}
	rounds := map[netip.Addr]int{}
	base := netip.MustParseAddr("2001:db8:100::1:0")
	wakes := map[string]int{}
	// phase names the part of the run a wake at now is counted in.
	phase := func(now time.Time) string {
		switch {
		case now.Before(start.Add(40*time.Second + 2*onnode.GARPRefresh)):
			return "settling"
		case now.Before(start.Add(40*time.Second + (2+onnode.GARPRefreshEarly)*onnode.GARPRefresh)):
			return "early"
		}
		return "settled"
	}
	// step runs a sync at now (as a wake or an addition would) and
	// returns when the next wake is due.
	step := func(now time.Time) time.Time {
		wakes[phase(now)]++
		due, refresh, next := dueAnnouncements(announced, wanted, now)
		for _, a := range refresh {
			if rounds[a] < 2 {
				t.Errorf("%s refreshed (one advertisement) after %d rounds, before its first two full ones", a, rounds[a])
			}
		}
		for _, a := range due {
			if rounds[a] >= 2 {
				t.Errorf("%s announced in a full round after its first two: a refresh is one advertisement", a)
			}
		}
		for _, a := range append(due, refresh...) {
			gap := now.Sub(last[a])
			switch early := rounds[a] < 2+onnode.GARPRefreshEarly; {
			case rounds[a] == 1 && gap < onnode.GARPDelay:
				t.Errorf("%s announced again %s after its first round, before GARPDelay", a, gap)
			case rounds[a] >= 2 && early && gap > onnode.GARPRefresh:
				t.Errorf("%s refreshed %s after its last announcement (refresh %d), more than GARPRefresh", a, gap, rounds[a]-1)
			case !early && (gap > onnode.GARPRefreshSettled || gap < onnode.GARPRefreshSettled/2):
				t.Errorf("%s refreshed %s after its last announcement (refresh %d), want between half GARPRefreshSettled and all of it", a, gap, rounds[a]-1)
			}
			rounds[a]++
			last[a] = now
		}
		return next
	}
	var next time.Time
	a := base
	for i := range 100 {
		a = a.Next()
		wanted[a] = true
		now := start.Add(time.Duration(i) * 400 * time.Millisecond)
		for !next.IsZero() && !next.After(now) {
			next = step(next)
		}
		if n := step(now); next.IsZero() || n.Before(next) {
			next = n
		}
		if rounds[a] != 1 {
			t.Fatalf("%s: announced %d times when added, want once", a, rounds[a])
		}
	}
	wakes = map[string]int{}
	end := start.Add(40*time.Second + (2+onnode.GARPRefreshEarly)*onnode.GARPRefresh + 6*onnode.GARPRefreshSettled)
	for !next.IsZero() && next.Before(end) {
		next = step(next)
	}
	for a := range wanted {
		if want := 2 + onnode.GARPRefreshEarly + 5; rounds[a] < want {
			t.Errorf("%s announced %d times, want at least %d", a, rounds[a], want)
		}
		if end.Sub(last[a]) > onnode.GARPRefreshSettled {
			t.Errorf("%s last announced %s before the end", a, end.Sub(last[a]))
		}
	}
	if wakes["early"] > 2*onnode.GARPRefreshEarly {
		t.Errorf("%d wakes in %d early refresh periods for 100 addresses, want at most 2 a period", wakes["early"], onnode.GARPRefreshEarly)
	}
	if wakes["settled"] > 2*6 {
		t.Errorf("%d wakes in 6 settled refresh periods for 100 addresses, want at most 2 a period", wakes["settled"])
	}
	t.Logf("wakes: %v", wakes)
}
