package sidecar

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/pkg/vrid"
)

// TestForeignRouters: adverts of the cluster's IDs from its members, and
// of other IDs, count as received only; a stranger's count under its
// vrid, family and source, with the time last heard; its Event is
// recorded once per interval, per ID, family and source; beyond
// foreignSeriesMax sources the rest count under "other"; before the first
// render nothing counts as foreign.
func TestForeignRouters(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr
	m := NewMetrics(nil)
	var events []string
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f := newForeignRouters(m, slog.New(slog.NewTextHandler(io.Discard, nil)), func(reason, msg string) {
		if reason == ReasonForeignVRRPRouter {
			events = append(events, msg)
		}
	}, 0)
	f.now = func() time.Time { return clock }
	advert := func(id uint8, family, src string) vrid.Advert {
		return vrid.Advert{Observation: vrid.Observation{ID: id, Version: 3, Family: family, Source: a(src), Priority: 254}}
	}
	stranger := advert(51, "ipv4", "198.51.100.66")

	f.heard("br-ex", stranger)
	if n := testutil.CollectAndCount(m.VRRP.Foreign); n != 0 || len(events) != 0 {
		t.Fatalf("before the first render: %d foreign series, events %q", n, events)
	}
	members := vrid.Members{}
	members.Add(51, "api", a("198.51.100.11"), []netip.Addr{a("198.51.100.5")})
	members.Add(51, "api", a("198.51.100.12"), []netip.Addr{a("198.51.100.5")})
	f.setMembers(members, vrid.Request{Cluster: "ostest", Keys: []vrid.Key{"api"}})

	for range 3 {
		f.heard("br-ex", advert(51, "ipv4", "198.51.100.12"))
		f.heard("br-ex", advert(52, "ipv4", "198.51.100.67"))
		f.heard("br-ex", stranger)
		clock = clock.Add(time.Second)
	}
	f.heard("br-ex", advert(51, "ipv6", "2001:db8:100::66"))
	if got := testutil.ToFloat64(m.VRRP.Received.WithLabelValues("ipv4")); got != 10 {
		t.Errorf("adverts received (ipv4): %v, want 10", got)
	}
	if got := testutil.ToFloat64(m.VRRP.Foreign.WithLabelValues("51", "ipv4", "198.51.100.66")); got != 3 {
		t.Errorf("the stranger's adverts: %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.VRRP.ForeignLastSeen.WithLabelValues("51", "ipv4", "198.51.100.66")); got != float64(clock.Add(-time.Second).Unix()) {
		t.Errorf("the stranger last seen at %v, want %v", got, clock.Add(-time.Second).Unix())
	}
	if n := testutil.CollectAndCount(m.VRRP.Foreign); n != 2 {
		t.Errorf("%d foreign series, want the stranger's over IPv4 and IPv6", n)
	}
	want := "VRRP ID 51 of this cluster (api) is advertised on br-ex by 198.51.100.66 (VRRPv3, ipv4, priority 254), which is no member of it: a router outside the cluster uses the ID; see the runbook of the alert VipctlForeignVRRPRouter"
	if len(events) != 2 || events[0] != want || !strings.Contains(events[1], " by 2001:db8:100::66 (VRRPv3, ipv6,") {
		t.Errorf("events %q, want one for each family, the first:\n%s", events, want)
	}

	clock = clock.Add(foreignEventEvery)
	f.heard("br-ex", stranger)
	if len(events) != 3 || events[2] != want {
		t.Errorf("after %s: events %q, want the stranger's again", foreignEventEvery, events)
	}

	for i := range foreignSeriesMax {
		f.heard("br-ex", advert(51, "ipv4", fmt.Sprintf("203.0.113.%d", i+1)))
	}
	if n := testutil.CollectAndCount(m.VRRP.Foreign); n != foreignSeriesMax+1 {
		t.Errorf("%d foreign series, want %d and one %q", n, foreignSeriesMax, foreignOtherSource)
	}
	if got := testutil.ToFloat64(m.VRRP.Foreign.WithLabelValues("51", "ipv4", foreignOtherSource)); got != 2 {
		t.Errorf("adverts counted under %q: %v, want the 2 sources beyond the cap", foreignOtherSource, got)
	}
	if got := testutil.ToFloat64(m.VRRP.Foreign.WithLabelValues("51", "ipv4", "198.51.100.66")); got != 4 {
		t.Errorf("the stranger's adverts after the cap: %v, want 4 under its own source", got)
	}
	if len(f.events.last) > foreignSeriesMax {
		t.Errorf("%d routers remembered for their Events, want at most %d", len(f.events.last), foreignSeriesMax)
	}
}
