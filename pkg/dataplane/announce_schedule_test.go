package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/render"
)

// TestRefreshesGoOutTogether: 100 Service addresses added one by one over
// 40 s (as a bulk of Services arrives) are each announced at once, again
// GARPDelay later (full rounds), and then refreshed (one advertisement)
// at least every GARPRefresh; but the refreshes go out together, so once
// they have settled the follower wakes about once a refresh period, not
// once per address.
func TestRefreshesGoOutTogether(t *testing.T) {
	start := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	announced := map[netip.Addr]announcement{}
	wanted := map[netip.Addr]bool{}
	last := map[netip.Addr]time.Time{}
	rounds := map[netip.Addr]int{}
	base := netip.MustParseAddr("2001:db8:100::1:0")
	// step runs a sync at now (as a wake or an addition would) and
	// returns when the next wake is due.
	step := func(now time.Time) time.Time {
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
			if rounds[a] >= 2 && now.Sub(last[a]) > render.GARPRefresh {
				t.Errorf("%s refreshed %s after its last announcement, more than GARPRefresh", a, now.Sub(last[a]))
			}
			if rounds[a] == 1 && now.Sub(last[a]) < render.GARPDelay {
				t.Errorf("%s announced again %s after its first round, before GARPDelay", a, now.Sub(last[a]))
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
	// The first two refresh periods settle the rounds; the next ten are
	// counted.
	counted := start.Add(40*time.Second + 2*render.GARPRefresh)
	end := counted.Add(10 * render.GARPRefresh)
	wakes := 0
	for !next.IsZero() && next.Before(end) {
		if !next.Before(counted) {
			wakes++
		}
		next = step(next)
	}
	for a := range wanted {
		if rounds[a] < 12 {
			t.Errorf("%s announced %d times in 12 refresh periods", a, rounds[a])
		}
		if end.Sub(last[a]) > render.GARPRefresh {
			t.Errorf("%s last announced %s before the end", a, end.Sub(last[a]))
		}
	}
	if wakes > 20 {
		t.Errorf("%d wakes in 10 refresh periods for 100 addresses, want at most 2 a period", wakes)
	}
	t.Logf("%d wakes in 10 refresh periods", wakes)
}
