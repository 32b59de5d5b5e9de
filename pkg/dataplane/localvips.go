package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// LocalResync is how often a running LocalVIPs syncs with nothing to
// prompt it. Everything that changes what Sync does prompts one at once
// (an address change, Kick after a new handover or a drain file change,
// the end of a kept route's grace), so this only repairs what nothing
// announces, such as a route someone else removed. A sync lists every
// address and local route: at once a second it was the largest part of
// an idle sidecar's CPU (docs/benchmarks.md).
const LocalResync = time.Minute

// addrPoll is how often Run syncs while it cannot follow address changes,
// and how soon it retries a failed sync.
const addrPoll = time.Second

// LocalVIPs keeps the VIPs this node holds or held lately local (see
// above). The sidecar runs one; Sync is safe to call from any goroutine.
type LocalVIPs struct {
	t     host.Target
	grace time.Duration
	kick  chan struct{}
	// early asks Run for an early sync (earlySync) only; due for the
	// announcements that are due (announceDue), which wakeAt sets.
	early, due chan struct{}
	// addrsChanged, when set, is told of every address change Run sees.
	addrsChanged func()

	mu sync.Mutex
	h  onnode.Handover
	// lost is when each kept VIP was first seen gone from the interface.
	lost map[netip.Addr]time.Time
	// wasHeld are the VIPs held at the last sync: one gone since without
	// a local route to keep it has its connections ended at once.
	wasHeld map[netip.Addr]bool
	// announced is when each address the follower added was announced
	// (follow.go); wake asks Run for the next announcements when they are
	// due (announceDue).
	announced map[netip.Addr]announcement
	wake      *time.Timer
	wakeDue   time.Time
	// proxying is whether IPv6 Service addresses were last answered by
	// proxy entries (proxyndp.go), nil before the first look; log hears
	// when that changes.
	proxying *bool
	log      *slog.Logger
	// added are Service addresses put in an instance ahead of the render
	// that will carry them (AddEarly); pending are those not yet merged
	// into h, guarded by earlyMu alone so that AddEarly never waits for
	// a sync.
	added   map[netip.Addr]earlyAddr
	earlyMu sync.Mutex
	pending []earlyAddr
	// anchorsHeld are the anchors on the interface as of the last sync
	// (guarded by earlyMu): AddEarly wakes a sync only for an address
	// whose anchor is here. The others wait for the next sync, which an
	// anchor's arrival starts.
	anchorsHeld map[netip.Addr]bool
}

// earlyAddr is an address added ahead of its render, the anchor it
// follows, and when.
type earlyAddr struct {
	addr, anchor netip.Addr
	at           time.Time
}

// NewLocalVIPs keeps routes grace long after their VIP left.
func NewLocalVIPs(t host.Target, grace time.Duration) *LocalVIPs {
	return &LocalVIPs{t: t, grace: grace, kick: make(chan struct{}, 1), early: make(chan struct{}, 1), due: make(chan struct{}, 1), lost: map[netip.Addr]time.Time{},
		announced: map[netip.Addr]announcement{}}
}

// OnAddressChange has Run call f after every address change in the
// target's namespace (and on every poll while it cannot follow them), so
// that the sidecar publishes the VIPs it holds from the same events. It
// is called once the sync the change started is done: a takeover's
// anchor starts a sync that adds and announces thousands of Service
// addresses, and a publish meanwhile (listing them, writing the Node,
// every watcher decoding it) would compete with it for the node's CPU
// and name half of them. Call it before Run.
func (l *LocalVIPs) OnAddressChange(f func()) { l.addrsChanged = f }

// SetLog has LocalVIPs log what it decides on its own (how IPv6 Service
// addresses are answered). Call it before Run.
func (l *LocalVIPs) SetLog(log *slog.Logger) { l.log = log }

// SetHandover sets the VIPs and the interface to watch.
func (l *LocalVIPs) SetHandover(h onnode.Handover) { l.SetHandoverAsOf(h, time.Time{}) }

// SetHandoverAsOf sets a handover rendered from the cluster as read at
// asOf (zero: now). Addresses added early (AddEarly) since then stay in
// it: the render may have read the cluster before their Service got
// them, and removing such an address only for the next render to add
// it back would break the new Service's first connections. Those added
// before asOf are the render's to keep or drop.
func (l *LocalVIPs) SetHandoverAsOf(h onnode.Handover, asOf time.Time) {
	if asOf.IsZero() {
		asOf = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takePending()
	for a, e := range l.added {
		if e.at.Before(asOf) {
			delete(l.added, a)
		}
	}
	l.h, _ = withEarly(h, l.added)
}

// AddEarly puts a Service address in the instance whose anchor it
// follows (announce: sidecar), ahead of the render that will carry it:
// where the anchor was held at the last sync, Run adds it at once
// (earlySync), so a new Service's address answers without waiting for
// the whole node's render; elsewhere the next sync takes it in. at is
// when its Service was seen with it (SetHandoverAsOf). Nothing happens
// unless the handover has that anchor's instance, and the address goes
// on the interface only while the anchor is held, as in every sync. It
// returns at once: a running sync does not hold it up.
func (l *LocalVIPs) AddEarly(addr, anchor netip.Addr, at time.Time) {
	l.earlyMu.Lock()
	l.pending = append(l.pending, earlyAddr{addr: addr, anchor: anchor, at: at})
	held := l.anchorsHeld[anchor]
	l.earlyMu.Unlock()
	if held {
		signal(l.early)
	}
}

// takePending merges what AddEarly left into added and h, and returns
// those of it that h now has in their anchor's instance. Call it with mu
// held.
func (l *LocalVIPs) takePending() []earlyAddr {
	l.earlyMu.Lock()
	pending := l.pending
	l.pending = nil
	l.earlyMu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	if l.added == nil {
		l.added = map[netip.Addr]earlyAddr{}
	}
	for _, e := range pending {
		l.added[e.addr] = e
	}
	var placed map[netip.Addr]bool
	l.h, placed = withEarly(l.h, l.added)
	return slices.DeleteFunc(pending, func(e earlyAddr) bool { return !placed[e.addr] })
}

// noteAnchors records which anchors are on the interface (onIf: its
// host addresses) for AddEarly. Call it with mu held.
func (l *LocalVIPs) noteAnchors(onIf map[netip.Addr]bool) {
	held := map[netip.Addr]bool{}
	for _, in := range l.h.Instances {
		for _, a := range in.Anchors {
			if onIf[a] {
				held[a] = true
			}
		}
	}
	l.earlyMu.Lock()
	l.anchorsHeld = held
	l.earlyMu.Unlock()
}

// withEarly is h with each early address in the instance of its anchor,
// where h has that instance and lacks the address; h's slices are not
// written to. placed are the early addresses the result has in their
// anchor's instance (put there now or by the render already).
func withEarly(h onnode.Handover, early map[netip.Addr]earlyAddr) (_ onnode.Handover, placed map[netip.Addr]bool) {
	cloned := false
	placed = map[netip.Addr]bool{}
	for _, e := range early {
		i := slices.IndexFunc(h.Instances, func(in onnode.HandoverInstance) bool {
			return (in.Family == 4) == e.addr.Is4() && slices.Contains(in.Anchors, e.anchor)
		})
		if i < 0 {
			continue
		}
		placed[e.addr] = true
		if slices.Contains(h.Instances[i].Sidecar, e.addr) {
			continue
		}
		if !cloned {
			h.Instances, cloned = slices.Clone(h.Instances), true
		}
		in := &h.Instances[i]
		in.Sidecar = append(slices.Clip(in.Sidecar), e.addr)
		in.VIPs = append(slices.Clip(in.VIPs), e.addr)
	}
	return h, placed
}

// Kick asks a running LocalVIPs to sync now (the drain file changed).
func (l *LocalVIPs) Kick() { signal(l.kick) }

// signal leaves a wake on ch (buffered, one deep) unless one waits there
// already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wakeAt asks Run to send the announcements due at t (the earliest
// asked for wins).
func (l *LocalVIPs) wakeAt(t time.Time) {
	if l.wake != nil {
		l.wake.Stop()
	}
	l.wake, l.wakeDue = time.AfterFunc(time.Until(t), func() { signal(l.due) }), t
}

// Run syncs whenever an address changes in the target's namespace (so a
// VIP keepalived adds gets its route at once, and the follower sees an
// anchor come and go), on Kick, when the grace of a kept route ends, and
// every resync, until ctx ends; an early sync (AddEarly) and the due
// announcements (announceDue) run without a sync where they can. While
// it cannot follow address changes, and after a failed sync, it syncs
// every second instead. report gets every failed sync.
func (l *LocalVIPs) Run(ctx context.Context, resync time.Duration, report func(error)) {
	addrsChanged := func() {
		if l.addrsChanged != nil {
			l.addrsChanged()
		}
	}
	t := time.NewTimer(resync)
	defer t.Stop()
	var sub *addrSubscription
	defer func() { sub.close() }()
	resubscribe, atTick, changed, step := true, false, false, syncAll
	for {
		if resubscribe {
			// (Re)subscribe before the sync, so that nothing between the
			// two is missed: a subscription ends when a burst of
			// thousands of address changes overflows it, or on any
			// receive error. One that ended within a second is renewed
			// only after the next poll, and reported: no busy loop.
			resubscribe = false
			sub.close()
			sub = l.subscribe(ctx, report)
		}
		var err error
		done := false
		switch step {
		case syncEarly:
			err, done = l.earlySync(), true
		case sendDue:
			done, err = l.announceDue(time.Now())
		}
		if !done {
			err = l.Sync(time.Now())
		}
		step = syncAll
		if err != nil {
			report(err)
		}
		if changed {
			changed = false
			addrsChanged()
		}
		wait := resync
		if sub.updates == nil {
			wait = min(wait, addrPoll)
		}
		if lapse, ok := l.nextLapse(time.Now()); ok {
			wait = min(wait, lapse)
		}
		if err != nil {
			wait = addrPoll // not at once: a lapse that failed would spin
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			resubscribe, atTick = atTick, false
			changed = sub.updates == nil
		case <-l.kick:
		case <-l.early:
			step = syncEarly
		case <-l.due:
			step = sendDue
		case _, ok := <-sub.updates:
			if ok {
				sub.updates = drainAddrUpdates(sub.updates)
			}
			if sub.updates == nil || !ok {
				sub.updates = nil
				if time.Since(sub.since) >= time.Second {
					resubscribe = true
				} else {
					atTick = true
					if err := sub.err(); err != nil && ctx.Err() == nil {
						report(fmt.Errorf("following address changes (retried every %s): %w", addrPoll, err))
					}
				}
			}
			changed = true
		}
	}
}

// runStep is what one turn of Run does: a whole sync, or where a wake
// needs less, only the early sync or only the due announcements (which
// fall back to a sync where they cannot do without).
type runStep int

const (
	syncAll runStep = iota
	syncEarly
	sendDue
)

// nextLapse tells how long until the grace of the first kept route ends,
// if one is running.
func (l *LocalVIPs) nextLapse(now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Duration
	found := false
	for _, since := range l.lost {
		d := max(since.Add(l.grace).Sub(now), 0)
		if !found || d < next {
			next, found = d, true
		}
	}
	return next, found
}

// addrUpdateBuffer is the address subscription's receive buffer: a
// pool instance's thousands of addresses arrive at once (keepalived's,
// or the follower's own burst), each notification a few hundred bytes.
const addrUpdateBuffer = 8 << 20

// addrSubscription is one subscription to the namespace's address
// changes: updates is nil when it could not be made.
type addrSubscription struct {
	updates chan netlink.AddrUpdate
	done    chan struct{}
	since   time.Time
	mu      sync.Mutex
	last    error
}

func (s *addrSubscription) close() {
	if s != nil {
		close(s.done)
	}
}

func (s *addrSubscription) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// subscribe follows the namespace's address changes.
func (l *LocalVIPs) subscribe(ctx context.Context, report func(error)) *addrSubscription {
	s := &addrSubscription{updates: make(chan netlink.AddrUpdate, 64), done: make(chan struct{}), since: time.Now()}
	opts := netlink.AddrSubscribeOptions{ReceiveBufferSize: addrUpdateBuffer, ReceiveBufferForceSize: true, ErrorCallback: func(err error) {
		s.mu.Lock()
		s.last = err
		s.mu.Unlock()
	}}
	if l.t.Netns != "" {
		ns, err := netns.GetFromName(l.t.Netns)
		if err != nil {
			report(fmt.Errorf("network namespace %s: %w", l.t.Netns, err))
			s.updates = nil
			return s
		}
		defer func() { _ = ns.Close() }()
		opts.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(s.updates, s.done, opts); err != nil && ctx.Err() == nil {
		report(fmt.Errorf("following address changes (VIPs get their local routes on the next tick instead): %w", err))
		s.updates = nil
	}
	return s
}

// drainAddrUpdates takes every address change already queued, so that one
// sync answers them all: keepalived adds and removes a pool instance's
// addresses one at a time, and a sync lists every address and local route,
// so one sync per change made a failover of 2500 addresses quadratic
// (BenchmarkScale: keepalived's VRRP process then starved for a minute).
// It returns nil once the subscription has ended.
func drainAddrUpdates(updates chan netlink.AddrUpdate) chan netlink.AddrUpdate {
	for updates != nil {
		select {
		case _, ok := <-updates:
			if !ok {
				return nil
			}
		default:
			return updates
		}
	}
	return nil
}

// Sync adds a route for every VIP held now, drops those whose VIP left
// more than grace ago (none while drained), and sets or restores the ARP
// settings to match.
func (l *LocalVIPs) Sync(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takePending()
	drained, _ := os.ReadFile(l.t.Path(onnode.DrainFile))
	isDrained := strings.TrimSpace(string(drained)) == "1"
	vips := map[netip.Addr]bool{}
	for _, in := range l.h.Instances {
		for _, v := range in.VIPs {
			vips[v] = true
		}
	}
	return l.t.InNetns(func() error {
		link, onIf, err := hostAddrs(l.h.Interface, len(vips) > 0)
		if err != nil {
			return err
		}
		var followErr error
		if link != nil {
			f, err := l.follow(link, onIf, now)
			l.noteAnchors(onIf)
			followErr = err
			onIf = f.here
			if len(f.added)+len(f.removed) > 0 && l.addrsChanged != nil {
				// Proxy entries send no address notifications.
				l.addrsChanged()
			}
		}
		held, ifindex := map[netip.Addr]bool{}, 0
		if link != nil {
			ifindex = link.Attrs().Index
		}
		for a := range onIf {
			if vips[a] {
				held[a] = true
			}
		}
		if err := l.syncRoutes(held, ifindex, isDrained, now); err != nil {
			return errors.Join(followErr, err)
		}
		return followErr
	})
}

// syncRoutes is Sync's part inside the namespace once the held VIPs are
// known.
func (l *LocalVIPs) syncRoutes(held map[netip.Addr]bool, ifindex int, isDrained bool, now time.Time) error {
	routes, err := localRoutes(unix.RT_TABLE_LOCAL)
	if err != nil {
		return err
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	for vip := range l.wasHeld {
		if _, kept := routes[vip]; !held[vip] && !kept {
			l.endConnections(vip) // no route ever kept it (or someone removed it)
		}
	}
	l.wasHeld = maps.Clone(held)
	keep4 := false
	for vip := range held {
		delete(l.lost, vip)
		keep4 = keep4 || vip.Is4()
		if _, ok := routes[vip]; !ok {
			if err := netlink.RouteAdd(localRoute(lo.Attrs().Index, vip)); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("local route for %s: %w", vip, err)
			}
		}
	}
	for vip, r := range routes {
		if held[vip] {
			continue
		}
		since, seen := l.lost[vip]
		switch {
		case isDrained:
			delete(l.lost, vip) // the grace starts at the undrain
		case !seen:
			l.lost[vip] = now
		case now.Sub(since) >= l.grace:
			if err := delLocalRoute(r); err != nil {
				return err
			}
			delete(l.lost, vip)
			l.endConnections(vip)
			continue
		}
		keep4 = keep4 || vip.Is4()
	}
	for vip := range l.lost {
		if _, ok := routes[vip]; !ok {
			// Removed by someone else (Undrain): it lapsed all the same.
			delete(l.lost, vip)
			l.endConnections(vip)
		}
	}
	if keep4 && ifindex > 0 {
		return setARP(l.t, ifindex, l.h.Interface)
	}
	if !keep4 {
		return restoreARP(l.t)
	}
	return nil
}

// endConnections ends the node's connections from or to a VIP that left
// the node and has no local route any more: its route lapsed, someone
// removed it, or it never had one (sockets.go says why). A failure is
// logged, not returned: the route is gone either way, and a kernel that
// cannot end sockets would fail every lapse alike.
func (l *LocalVIPs) endConnections(vip netip.Addr) {
	if isLocalAddr(vip) {
		return // still an address of the node (no VIP of the handover now): its connections live
	}
	n, err := abortConnections(vip)
	if l.log == nil {
		return
	}
	if err != nil {
		l.log.Warn("connections of a VIP that left this node not ended: their clients here wait for their own timeout", "vip", vip, "ended", n, "err", err)
		return
	}
	l.log.Info("connections of a VIP that left this node ended", "vip", vip, "ended", n)
}

// hostAddrs lists the host addresses (/32, /128: VIPs, never a node's own
// subnet address) on the interface. want false, or no interface named:
// no link and nothing listed.
func hostAddrs(iface string, want bool) (netlink.Link, map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	if iface == "" || !want {
		return nil, out, nil
	}
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, nil, fmt.Errorf("VRRP interface %s: %w", iface, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, fmt.Errorf("listing addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ones, bits := a.Mask.Size(); !ok || ones != bits {
			continue
		}
		out[ip.Unmap()] = true
	}
	return link, out, nil
}
