package sidecar

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/pkg/vrid"
)

// TestClashProposal: a router outside the cluster advertising the API's
// ID gets no proposal before DefaultClashProposeAfter; then one Event
// and series propose an ID that is neither the cluster's nor one heard
// on the segment (the ID the proposal would take without listening is
// in use there, so it must not be proposed); the Event comes once per
// interval while the clash lasts; silent past clashGap, the clash ends
// (no series) and a return starts its time again. An ID of a key the
// file cannot pin is told, with nothing proposed.
func TestClashProposal(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr
	m := NewMetrics(nil)
	type event struct{ reason, msg string }
	var events []event
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f := newForeignRouters(m, slog.New(slog.NewTextHandler(io.Discard, nil)), func(reason, msg string) {
		if reason == ReasonVRRPIDProposed {
			events = append(events, event{reason, msg})
		}
	}, 0)
	f.now = func() time.Time { return clock }

	req := vrid.Request{Cluster: "ostest", Keys: []vrid.Key{"api", "ingress"}, Overrides: map[vrid.Key]uint8{}}
	assigned, err := vrid.Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	api, _ := assigned.ID("api")
	ingress, _ := assigned.ID("ingress")
	deaf, err := vrid.ProposeOverrides(req, []vrid.Clash{{ID: api, Key: "api"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := deaf["api"]
	local := api + 100 // a Local Service's instance, not in the file
	for slices.Contains([]uint8{api, ingress, elsewhere}, local) {
		local++
	}
	members := vrid.Members{}
	members.Add(api, "api", a("198.51.100.11"), []netip.Addr{a("198.51.100.5")})
	members.Add(ingress, "ingress", a("198.51.100.11"), []netip.Addr{a("198.51.100.6")})
	members.Add(local, "service/lab/echo", a("198.51.100.11"), []netip.Addr{a("198.51.100.130")})
	f.setMembers(members, req)

	advert := func(id uint8, src string) vrid.Advert {
		return vrid.Advert{Observation: vrid.Observation{ID: id, Version: 3, Family: "ipv4", Source: a(src), Priority: 100}}
	}
	second := func() {
		f.heard("br-ex", advert(api, "198.51.100.66"))
		f.heard("br-ex", advert(elsewhere, "198.51.100.67"))
		f.heard("br-ex", advert(ingress, "198.51.100.11"))
		clock = clock.Add(time.Second)
	}
	for range int(DefaultClashProposeAfter / time.Second) {
		second()
	}
	if len(events) != 0 || testutil.CollectAndCount(m.VRRP.ClashProposed) != 0 {
		t.Fatalf("before %s: events %q, %d series", DefaultClashProposeAfter, events, testutil.CollectAndCount(m.VRRP.ClashProposed))
	}
	second()
	if len(events) != 1 {
		t.Fatalf("after %s: %d events, want 1: %q", DefaultClashProposeAfter, len(events), events)
	}
	proposed := uint8(testutil.ToFloat64(m.VRRP.ClashProposed.WithLabelValues("api", fmt.Sprint(api))))
	if proposed == 0 || slices.Contains([]uint8{api, ingress, elsewhere, local}, proposed) {
		t.Errorf("proposed ID %d: want one neither the cluster's (%d, %d, %d) nor heard on the segment (%d)", proposed, api, ingress, local, elsewhere)
	}
	wantMsg := fmt.Sprintf("VRRP ID %d of this cluster (api) has been advertised by 198.51.100.66, a router outside the cluster, for more than 5m0s. Free on br-ex as far as this node has heard (IDs heard there in the last 30m0s: %s), and clear of this cluster's other IDs: pin spec.vrrp.virtualRouterIDs {api: %d} in the cluster file and run vipctl update",
		api, joinIDs(slices.Sorted(slices.Values([]uint8{api, ingress, elsewhere}))), proposed)
	if !strings.HasPrefix(events[0].msg, wantMsg) {
		t.Errorf("event:\n%s\nwant it to begin:\n%s", events[0].msg, wantMsg)
	}

	for range 60 {
		second()
	}
	if len(events) != 1 {
		t.Errorf("a minute later: %d events, want still 1", len(events))
	}
	for range int((foreignEventEvery - time.Minute) / time.Second) {
		second()
	}
	if len(events) != 2 || events[1].msg != events[0].msg {
		t.Errorf("after %s: events %q, want the same proposal again", foreignEventEvery, events)
	}

	// The stranger leaves; the cluster's own adverts go on.
	for range int(clashGap/time.Second) + 1 {
		f.heard("br-ex", advert(ingress, "198.51.100.11"))
		clock = clock.Add(time.Second)
	}
	if n := testutil.CollectAndCount(m.VRRP.ClashProposed); n != 0 {
		t.Errorf("%d series after the stranger left, want none", n)
	}
	f.heard("br-ex", advert(api, "198.51.100.66"))
	clock = clock.Add(DefaultClashProposeAfter - 2*time.Second)
	f.heard("br-ex", advert(api, "198.51.100.66"))
	if n := testutil.CollectAndCount(m.VRRP.ClashProposed); n != 0 {
		t.Errorf("%d series right after the stranger came back, want none: its time starts again", n)
	}

	for range int(DefaultClashProposeAfter / time.Second) {
		f.heard("br-ex", advert(local, "198.51.100.68"))
		clock = clock.Add(time.Second)
	}
	f.heard("br-ex", advert(local, "198.51.100.68"))
	if last := events[len(events)-1].msg; !strings.Contains(last, fmt.Sprintf("VRRP ID %d of this cluster (service/lab/echo)", local)) || !strings.Contains(last, "cannot be pinned") {
		t.Errorf("a Local Service's ID: last event %q, want it told as not pinnable", last)
	}
	if n := testutil.CollectAndCount(m.VRRP.ClashProposed); n != 0 {
		t.Errorf("%d series, want none: the API's stranger left again, the Local Service's ID cannot be pinned", n)
	}
}
