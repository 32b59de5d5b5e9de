package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vipctl/pkg/vrid"
)

const (
	// foreignSeriesMax caps the (vrid, family, source) series of the
	// foreign-advert metrics: forged adverts from ever new sources must
	// not grow every scrape without bound. Later sources count under
	// foreignOtherSource.
	foreignSeriesMax   = 32
	foreignOtherSource = "other"
	// foreignEventEvery is how often at most the ForeignVRRPRouter Event
	// is recorded again for one VRRP ID, family and source: a router
	// advertises every second, the Node's Events must stay readable.
	foreignEventEvery = 30 * time.Minute
	// tapRetry is how soon a tap that could not be opened (the interface
	// is not there yet: OVN-Kubernetes makes br-ex at boot) or that failed
	// is opened again.
	tapRetry = 30 * time.Second
	// tapBatch is how long the tap lets adverts queue between reads
	// (vrid.TapOptions.Batch): with the fast profile the cluster's own
	// adverts came tens a second, each a wake of the sidecar.
	tapBatch = time.Second
	// ReasonForeignVRRPRouter is the Node Event's reason.
	ReasonForeignVRRPRouter = "ForeignVRRPRouter"
)

// foreignRouters tells the adverts of the cluster's VRRP IDs that come from
// routers outside it (vrid.Members.Foreign), counts them and records an
// Event on the Node for each such router, now and then.
type foreignRouters struct {
	m     *Metrics
	log   *slog.Logger
	now   func() time.Time
	event func(reason, msg string)

	mu      sync.Mutex
	members vrid.Members
	// series are the sources given series of their own.
	series map[foreignKey]bool
	// events gates each router's Event.
	events *eventGate[foreignKey]
	// received is the counter of adverts heard, by family: looked up
	// once, not for each of the cluster's own adverts (tens a second
	// with the fast profile).
	received map[string]prometheus.Counter
	// clashes proposes a free ID for a clash that lasts (clash.go).
	clashes *clashes
}

type foreignKey struct {
	id     uint8
	family string
	source netip.Addr
}

// newForeignRouters: event records a Node Event; a clash is proposed
// another ID after proposeAfter (DefaultClashProposeAfter when zero).
func newForeignRouters(m *Metrics, log *slog.Logger, event func(reason, msg string), proposeAfter time.Duration) *foreignRouters {
	return &foreignRouters{m: m, log: log, now: time.Now, event: event, series: map[foreignKey]bool{}, events: newEventGate[foreignKey](foreignEventEvery, foreignSeriesMax),
		received: map[string]prometheus.Counter{}, clashes: newClashes(proposeAfter, m.VRRP.ClashProposed)}
}

// setMembers takes the cluster's routers, and its ID request, from the
// last render.
func (f *foreignRouters) setMembers(m vrid.Members, req vrid.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = m
	f.clashes.req = req
}

// heard takes one advert the tap on iface heard.
func (f *foreignRouters) heard(iface string, a vrid.Advert) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.received[a.Family]
	if !ok {
		c = f.m.VRRP.Received.WithLabelValues(a.Family)
		f.received[a.Family] = c
	}
	c.Inc()
	now := f.now()
	f.clashes.advert(a.ID, now)
	// Before the first render nothing is known to be the cluster's.
	if f.members == nil || !f.members.Foreign(a) {
		return
	}
	if msg := f.clashes.foreign(a.ID, f.members[a.ID].Keys, a.Source.String(), iface, now); msg != "" {
		f.log.Warn(msg)
		f.event(ReasonVRRPIDProposed, msg)
	}
	k := foreignKey{id: a.ID, family: a.Family, source: a.Source}
	source := a.Source.String()
	if !f.series[k] {
		if len(f.series) < foreignSeriesMax {
			f.series[k] = true
		} else {
			source = foreignOtherSource
		}
	}
	labels := []string{strconv.Itoa(int(a.ID)), a.Family, source}
	f.m.VRRP.Foreign.WithLabelValues(labels...).Inc()
	f.m.VRRP.ForeignLastSeen.WithLabelValues(labels...).Set(float64(now.Unix()))

	// Bounded as the series are: while more routers than that are
	// fresh, the new ones get no Event (the metric's "other" counts
	// them).
	if !f.events.allow(k, now) {
		return
	}
	msg := fmt.Sprintf("VRRP ID %d of this cluster (%s) is advertised on %s by %s (VRRPv%d, %s, priority %d), which is no member of it: a router outside the cluster uses the ID; see the runbook of the alert VipctlForeignVRRPRouter",
		a.ID, strings.Join(f.members[a.ID].Keys, ", "), iface, a.Source, a.Version, a.Family, a.Priority)
	f.log.Warn(msg)
	f.event(ReasonForeignVRRPRouter, msg)
}

// rememberVRRP takes the cluster's routers and the node's VRRP interfaces
// from a render, and has vrrpLoop follow a change of the interfaces.
func (s *Sidecar) rememberVRRP(members vrid.Members, req vrid.Request, ifaces []string) {
	s.foreign.setMembers(members, req)
	s.mu.Lock()
	changed := !slices.Equal(s.vrrpIfaces, ifaces)
	s.vrrpIfaces = ifaces
	s.mu.Unlock()
	if changed {
		select {
		case s.vrrpKick <- struct{}{}:
		default:
		}
	}
}

// vrrpLoop keeps a tap open on each of the node's VRRP interfaces as of
// the last render, for as long as the sidecar runs: a foreign router is
// seen whenever it advertises, not only while someone listens.
func (s *Sidecar) vrrpLoop(ctx context.Context) {
	taps := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range taps {
			stop()
		}
		wg.Wait()
	}()
	for {
		s.mu.Lock()
		want := s.vrrpIfaces
		s.mu.Unlock()
		for iface, stop := range taps {
			if !slices.Contains(want, iface) {
				stop()
				delete(taps, iface)
			}
		}
		for _, iface := range want {
			if _, ok := taps[iface]; ok {
				continue
			}
			tctx, stop := context.WithCancel(ctx)
			taps[iface] = stop
			wg.Add(1)
			go func() { defer wg.Done(); s.tapLoop(tctx, iface) }()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.vrrpKick:
		}
	}
}

// tapLoop hears iface's VRRP until ctx ends, opening its tap again after
// a failure (the interface went away or is not there yet).
func (s *Sidecar) tapLoop(ctx context.Context, iface string) {
	var said string
	for {
		var tap *vrid.Tap
		// The socket belongs to the namespace it is opened in; reading it
		// needs no thread locked there.
		err := s.o.InNetns(func() (err error) { tap, err = vrid.OpenTap(iface, vrid.TapOptions{Batch: tapBatch}); return err })
		if err == nil {
			s.log.Info("watching VRRP adverts for routers outside the cluster", "interface", iface)
			said = ""
			err = tap.Read(ctx, time.Time{}, func(a vrid.Advert) { s.foreign.heard(iface, a) })
			_ = tap.Close()
		}
		if ctx.Err() != nil {
			return
		}
		s.m.Failures.WithLabelValues("vrrp-watch").Inc()
		if err.Error() != said {
			said = err.Error()
			s.log.Warn("not watching VRRP adverts; retrying", "interface", iface, "in", tapRetry, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tapRetry):
		}
	}
}
