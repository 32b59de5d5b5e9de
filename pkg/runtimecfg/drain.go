package runtimecfg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/internal/inns"
	"github.com/vipctl/vipctl/pkg/render"
)

// The old master's half of a hitless handover (the new master's half is
// the handover table). Once keepalived gives a VIP away it deletes the
// address, and with it the node's last reason to accept or send anything
// for the VIP: answers still owed on open connections would have no
// source address, and segments the new master sends on would be dropped.
// So every VIP the node holds gets a local route of its own (table local,
// device lo, protocol localRouteProtocol) as soon as it is seen on the
// interface, which outlives the address: for HandoverGrace after the VIP
// left, and for as long as the node is drained. The route must be there
// before the VIP leaves, and a VIP can leave without warning when a peer
// returns and preempts, hence "as soon as held" rather than "on leaving".
// While the node holds the VIP the route changes nothing.
//
// Two ARP settings on the VRRP interface keep those routes from pulling
// clients back once the address is gone: arp_ignore 1 (answer ARP only for
// addresses on the interface, not for a route) and arp_announce 2 (never
// name the VIP as the sender of the node's own ARP requests). They are set
// while any IPv4 route is kept and restored when the last one goes. IPv6
// needs neither: neighbour discovery answers only for addresses.

// localRouteProtocol marks vipctl's local routes for VIPs (rtnetlink protocol
// numbers up to 255 are free for routing daemons; this one is vipctl's).
const localRouteProtocol = netlink.RouteProtocol(0x76)

// localRouteMetric keeps the route apart from the kernel's own local route
// for the address, which has metric 0 and leaves with the address.
const localRouteMetric = 0x76

// ipv4 devconf indexes (linux/ip.h), set over rtnetlink so the sidecar
// needs no writable /proc/sys.
const (
	devconfArpAnnounce = 18
	devconfArpIgnore   = 19
)

// arpSavedFile keeps the interface's ARP settings from before vipctl set
// them, to restore when the last IPv4 local route goes.
const arpSavedFile = render.RunDir + "/drain-arp"

// Drain starts a planned handover: the VIPs this node holds keep being
// served after they move (local routes, ARP settings), then the drain file
// drops every instance's priority to 1 so that peers take the VIPs over
// while this node still answers. keepalived may stop once they have.
func Drain(t Target, h render.Handover) error {
	l := NewLocalVIPs(t, HandoverGrace)
	l.SetHandover(h)
	if err := l.Sync(time.Now()); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return writeRunFile(t, render.DrainFile, true)
}

// Undrain ends a drain, or cleans up after one that a stopped pod left:
// the drain file goes back to 0, every local route goes but those of
// proxied addresses (a proxy entry draws traffic that only its route
// accepts; a running LocalVIPs puts back those of the VIPs still held),
// the ARP settings are restored.
func Undrain(t Target) error {
	if err := writeRunFile(t, render.DrainFile, false); err != nil {
		return err
	}
	return inns.Run(t.Netns, func() error {
		routes, err := localRoutes(unix.RT_TABLE_LOCAL)
		if err != nil {
			return err
		}
		proxied, err := proxyEntries(0)
		if err != nil {
			return err
		}
		for vip, r := range routes {
			if proxied[vip] {
				continue
			}
			if err := delLocalRoute(r); err != nil {
				return err
			}
		}
		return restoreARP(t)
	})
}

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
	t     Target
	grace time.Duration
	kick  chan struct{}
	// addrsChanged, when set, is told of every address change Run sees.
	addrsChanged func()

	mu sync.Mutex
	h  render.Handover
	// lost is when each kept VIP was first seen gone from the interface.
	lost map[netip.Addr]time.Time
	// announced is when each address the follower added was announced
	// (follow.go); wake kicks a sync when the next announcement is due.
	announced map[netip.Addr]announcement
	wake      *time.Timer
	// proxying is whether IPv6 Service addresses were last answered by
	// proxy entries (proxyndp.go), nil before the first look; log hears
	// when that changes.
	proxying *bool
	log      *slog.Logger
}

// NewLocalVIPs keeps routes grace long after their VIP left.
func NewLocalVIPs(t Target, grace time.Duration) *LocalVIPs {
	return &LocalVIPs{t: t, grace: grace, kick: make(chan struct{}, 1), lost: map[netip.Addr]time.Time{}}
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
func (l *LocalVIPs) SetHandover(h render.Handover) {
	l.mu.Lock()
	l.h = h
	l.mu.Unlock()
}

// Kick asks a running LocalVIPs to sync now (the drain file changed).
func (l *LocalVIPs) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// wakeAt kicks a sync at t (the earliest asked for wins).
func (l *LocalVIPs) wakeAt(t time.Time) {
	if l.wake != nil {
		l.wake.Stop()
	}
	l.wake = time.AfterFunc(time.Until(t), l.Kick)
}

// Run syncs whenever an address changes in the target's namespace (so a
// VIP keepalived adds gets its route at once, and the follower sees an
// anchor come and go), on Kick, when the grace of a kept route ends, and
// every resync, until ctx ends. While it cannot follow address changes,
// and after a failed sync, it syncs every second instead. report gets
// every failed sync.
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
	resubscribe, atTick, changed := true, false, false
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
		err := l.Sync(time.Now())
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
	drained, _ := os.ReadFile(l.t.path(render.DrainFile))
	isDrained := strings.TrimSpace(string(drained)) == "1"
	vips := map[netip.Addr]bool{}
	for _, in := range l.h.Instances {
		for _, v := range in.VIPs {
			vips[v] = true
		}
	}
	return inns.Run(l.t.Netns, func() error {
		link, onIf, err := hostAddrs(l.h.Interface, len(vips) > 0)
		if err != nil {
			return err
		}
		var followErr error
		if link != nil {
			f, err := l.follow(link, onIf, now)
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
			continue
		}
		keep4 = keep4 || vip.Is4()
	}
	for vip := range l.lost {
		if _, ok := routes[vip]; !ok {
			delete(l.lost, vip) // removed by someone else (Undrain): nothing lapses
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

func localRoute(lo int, vip netip.Addr) *netlink.Route {
	return &netlink.Route{
		LinkIndex: lo, Dst: &net.IPNet{IP: vip.AsSlice(), Mask: net.CIDRMask(vip.BitLen(), vip.BitLen())},
		Type: unix.RTN_LOCAL, Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST,
		Protocol: localRouteProtocol, Priority: localRouteMetric,
	}
}

// localRoutes lists vipctl's local routes in table by address (table
// local: the held VIPs'; takeoverTable: the IPv6 takeover routes). It
// reads the route dump itself, headers first: a node answering for
// thousands of Service addresses has thousands of routes in table local,
// and the netlink package's full decoding of each cost a failover's
// sync 0.3 s of CPU (BenchmarkScale's profile).
func localRoutes(table int) (map[netip.Addr]netlink.Route, error) {
	out := map[netip.Addr]netlink.Route{}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
		req.AddData(&nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(family)}})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE)
		if err != nil {
			return nil, fmt.Errorf("listing vipctl's local routes: %w", err)
		}
		for _, m := range msgs {
			if r, ok := parseLocalRoute(m, table); ok {
				ip, _ := netip.AddrFromSlice(r.Dst.IP)
				out[ip.Unmap()] = r
			}
		}
	}
	return out, nil
}

// parseLocalRoute reads one route of a dump if it is vipctl's (protocol
// localRouteProtocol) in table and has a destination.
func parseLocalRoute(m []byte, table int) (netlink.Route, bool) {
	if len(m) < unix.SizeofRtMsg {
		return netlink.Route{}, false
	}
	hdr := nl.DeserializeRtMsg(m)
	if netlink.RouteProtocol(hdr.Protocol) != localRouteProtocol || (hdr.Table != unix.RT_TABLE_COMPAT && int(hdr.Table) != table) {
		return netlink.Route{}, false
	}
	attrs, err := nl.ParseRouteAttr(m[unix.SizeofRtMsg:])
	if err != nil {
		return netlink.Route{}, false
	}
	r := netlink.Route{Table: int(hdr.Table), Type: int(hdr.Type), Scope: netlink.Scope(hdr.Scope), Protocol: localRouteProtocol}
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_TABLE:
			if len(a.Value) == 4 {
				r.Table = int(nl.NativeEndian().Uint32(a.Value))
			}
		case unix.RTA_DST:
			r.Dst = &net.IPNet{IP: net.IP(a.Value), Mask: net.CIDRMask(int(hdr.Dst_len), len(a.Value)*8)}
		case unix.RTA_OIF:
			if len(a.Value) == 4 {
				r.LinkIndex = int(nl.NativeEndian().Uint32(a.Value))
			}
		case unix.RTA_PRIORITY:
			if len(a.Value) == 4 {
				r.Priority = int(nl.NativeEndian().Uint32(a.Value))
			}
		}
	}
	return r, r.Dst != nil && r.Table == table
}

func delLocalRoute(r netlink.Route) error {
	if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("removing local route %s: %w", r.Dst, err)
	}
	return nil
}

// setARP saves the interface's ARP settings once (a later call must not
// save its own values) and sets arp_ignore 1, arp_announce 2.
func setARP(t Target, ifindex int, iface string) error {
	conf, err := inetConf(ifindex)
	if err != nil {
		return err
	}
	saved := fmt.Sprintf("%s %d %d\n", iface, conf[devconfArpIgnore], conf[devconfArpAnnounce])
	f, err := os.OpenFile(t.path(arpSavedFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return err
	default:
		_, werr := f.WriteString(saved)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	if conf[devconfArpIgnore] >= 1 && conf[devconfArpAnnounce] >= 2 {
		return nil
	}
	return setInetConf(ifindex, map[int]uint32{
		devconfArpIgnore:   max(conf[devconfArpIgnore], 1),
		devconfArpAnnounce: max(conf[devconfArpAnnounce], 2),
	})
}

// restoreARP puts back the ARP settings saved before the first route, if
// any were saved.
func restoreARP(t Target) error {
	data, err := os.ReadFile(t.path(arpSavedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fields := strings.Fields(string(data))
	if len(fields) != 3 {
		return fmt.Errorf("%s: want \"IFACE ARP_IGNORE ARP_ANNOUNCE\", got %q", arpSavedFile, data)
	}
	ignore, err1 := strconv.ParseUint(fields[1], 10, 32)
	announce, err2 := strconv.ParseUint(fields[2], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s: %w", arpSavedFile, err)
	}
	link, err := netlink.LinkByName(fields[0])
	if err == nil {
		err = setInetConf(link.Attrs().Index, map[int]uint32{devconfArpIgnore: uint32(ignore), devconfArpAnnounce: uint32(announce)})
	}
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &notFound) {
		return err
	}
	return os.Remove(t.path(arpSavedFile))
}

// inetConf reads an interface's IPv4 settings (the devconf array that
// /proc/sys/net/ipv4/conf/IFACE shows), indexed by devconf number.
func inetConf(ifindex int) (map[int]uint32, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return nil, fmt.Errorf("reading interface %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_AF_SPEC {
				continue
			}
			if conf, ok := inetConfIn(a.Value); ok {
				return conf, nil
			}
		}
	}
	return nil, fmt.Errorf("interface %d: no IPv4 settings", ifindex)
}

func inetConfIn(afSpec []byte) (map[int]uint32, bool) {
	afs, err := nl.ParseRouteAttr(afSpec)
	if err != nil {
		return nil, false
	}
	for _, af := range afs {
		if af.Attr.Type&^unix.NLA_F_NESTED != unix.AF_INET {
			continue
		}
		inet, err := nl.ParseRouteAttr(af.Value)
		if err != nil {
			return nil, false
		}
		for _, c := range inet {
			if c.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_INET_CONF {
				continue
			}
			conf := map[int]uint32{}
			for i := 0; (i+1)*4 <= len(c.Value); i++ {
				conf[i+1] = nl.NativeEndian().Uint32(c.Value[i*4:])
			}
			return conf, true
		}
	}
	return nil, false
}

// setInetConf sets IPv4 settings of an interface (RTM_SETLINK with
// IFLA_AF_SPEC/AF_INET/IFLA_INET_CONF): CAP_NET_ADMIN is enough.
func setInetConf(ifindex int, values map[int]uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	conf := spec.AddRtAttr(unix.AF_INET, nil).AddRtAttr(unix.IFLA_INET_CONF, nil)
	for id, v := range values {
		conf.AddRtAttr(id, nl.Uint32Attr(v))
	}
	req.AddData(spec)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("setting ARP settings of interface %d: %w", ifindex, err)
	}
	return nil
}
