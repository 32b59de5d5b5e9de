package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/linklayer"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// The Service addresses of a pool with announce: sidecar. keepalived moves
// only each instance's anchor (the one address in its adverts); the sidecar
// follows the anchor: while it is on the interface, the instance's Service
// addresses are put there too, all in one netlink burst, and announced
// (gratuitous ARP, unsolicited neighbour advertisements with the Override
// flag) as keepalived announces a new master's addresses; once it is gone
// they are removed. keepalived adds an instance's addresses one netlink
// request at a time and sends no advert meanwhile, so an instance of
// thousands of addresses blocked its VRRP process for longer than the
// master-down interval (docs/benchmarks.md, issue 17).
//
// The follower keeps no state it could lose: every sync compares the
// interface with the anchors, so a sidecar that restarts puts right what
// changed while it was away. A keepalived that is SIGKILLed leaves its
// anchor on the interface, as it leaves every address; the Service
// addresses stay with it, until keepalived starts again and removes the
// anchor, which removes them.

// followed is what one sync of the follower changed, and what the node
// answers for afterwards.
type followed struct {
	added, removed []netip.Addr
	// here is every host address the node answers neighbour discovery
	// for once the sync is done: those on the interface and the IPv6
	// ones it proxies.
	here map[netip.Addr]bool
}

// follow brings the sidecar's addresses on link in line with the anchors
// found on it (onIf: every host address on the interface) and announces
// what it added and what is due again. An IPv6 Service address goes on
// the interface, or, where the node's settings let the kernel answer for
// proxy entries (proxyMode), it gets a local route and a proxy neighbour
// entry instead (proxyndp.go). Call it inside the namespace.
func (l *LocalVIPs) follow(link netlink.Link, onIf map[netip.Addr]bool, now time.Time) (followed, error) {
	began := time.Now()
	f := followed{here: onIf}
	ifindex := link.Attrs().Index
	proxied, err := proxyEntries(ifindex)
	if err != nil {
		return f, err
	}
	if len(l.h.SidecarRanges) == 0 && len(proxied) == 0 {
		clear(l.announced)
		return f, nil
	}
	proxy := slices.ContainsFunc(l.h.SidecarRanges, func(r v1alpha1.AddressRange) bool { return !r.Is4() }) && l.proxyMode(link)
	p := l.plan(onIf, proxied, proxy)
	f.added, f.removed = p.added, p.removed
	if err := errors.Join(proxyBurst(ifindex, p.delProxy, false), addrBurst(ifindex, p.delAddr, false)); err != nil {
		return f, err
	}
	f.here = maps.Clone(onIf)
	maps.Copy(f.here, proxied)
	for _, a := range f.removed {
		delete(f.here, a)
	}
	for a := range l.announced {
		if !p.wanted[a] {
			delete(l.announced, a)
		}
	}
	next, whole, err := l.add(link, &f, p.byProxy, began)
	if !whole {
		return f, err
	}
	errs := []error{err}
	// Now proxied: off the interface; now on it: no more proxy entry.
	movedAddr, movedProxy := partition(p.moved, p.byProxy)
	if err := errors.Join(addrBurst(ifindex, movedAddr, false), proxyBurst(ifindex, movedProxy, false)); err != nil {
		errs = append(errs, err)
	}
	due, refresh, after := dueAnnouncements(l.announced, p.wanted, now)
	if !after.IsZero() && (next.IsZero() || after.Before(next)) {
		next = after
	}
	if !next.IsZero() {
		l.wakeAt(next)
	}
	errs = append(errs, announceDueRounds(link, due, refresh))
	return f, errors.Join(errs...)
}

// followPlan is what one sync of the follower changes, decided from the
// held anchors before any write.
type followPlan struct {
	// wanted are the Service addresses of every instance whose anchor is
	// held here; added those of them the node does not answer for yet.
	wanted map[netip.Addr]bool
	added  []netip.Addr
	// What goes: addresses (delAddr) and proxy entries (delProxy) no held
	// anchor calls for, both in removed; moved are wanted addresses now
	// answered the other way, undone once the other way is in place, so
	// that they never stop answering.
	removed, delAddr, delProxy, moved []netip.Addr
	// byProxy tells whether an address is answered by a proxy entry
	// (IPv6 under proxyMode) rather than put on the interface.
	byProxy func(netip.Addr) bool
}

// plan compares the interface (onIf) and the proxy entries with what the
// held anchors call for. Every list is sorted.
func (l *LocalVIPs) plan(onIf, proxied map[netip.Addr]bool, proxy bool) followPlan {
	p := followPlan{wanted: map[netip.Addr]bool{}, byProxy: func(a netip.Addr) bool { return proxy && a.Is6() }}
	inRanges := func(a netip.Addr) bool {
		return slices.ContainsFunc(l.h.SidecarRanges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) })
	}
	// keepalived's: the anchors, and the addresses of the pools' Local
	// Services, which keepalived adds in instances of their own.
	anchors := map[netip.Addr]bool{}
	for _, a := range l.h.Keepalived {
		anchors[a] = true
	}
	for _, in := range l.h.Instances {
		held := false
		for _, a := range in.Anchors {
			anchors[a] = true
			held = held || onIf[a]
		}
		if !held {
			continue
		}
		for _, a := range in.Sidecar {
			p.wanted[a] = true
			if (p.byProxy(a) && !proxied[a]) || (!p.byProxy(a) && !onIf[a]) {
				p.added = append(p.added, a)
			}
		}
	}
	for a := range onIf {
		switch {
		case anchors[a] || !inRanges(a):
		case !p.wanted[a]:
			p.delAddr = append(p.delAddr, a)
		case p.byProxy(a):
			p.moved = append(p.moved, a)
		}
	}
	for a := range proxied {
		switch {
		case !p.wanted[a]:
			p.delProxy = append(p.delProxy, a)
		case !p.byProxy(a):
			p.moved = append(p.moved, a)
		}
	}
	p.removed = append(slices.Clone(p.delAddr), p.delProxy...)
	for _, list := range [][]netip.Addr{p.added, p.removed, p.delAddr, p.delProxy, p.moved} {
		slices.SortFunc(list, netip.Addr.Compare)
	}
	return p
}

// add puts f.added in place and announces them, marking each in f.here
// as it answers, and says when the next announcement is due. whole is
// false when a write failed and the sync must stop there.
//
// A proxied address needs a local route too, or the node would not
// accept what its entry draws. The takeover routes (takeover.go) already
// accept what arrives on the interface for every IPv6 VIP of the node's
// instances, so for those the route in table local (for the node's own
// connections and the handover grace) follows once every window answers;
// an address without one (a Service newer than the last apply's takeover
// routes) gets its route first. Reading the takeover routes lists one per
// IPv6 VIP of the node: worth it for a failover's burst, not for a window
// or less (Services added one at a time, where it took most of the sync),
// whose addresses all get their routes first.
func (l *LocalVIPs) add(link netlink.Link, f *followed, byProxy func(netip.Addr) bool, began time.Time) (next time.Time, whole bool, err error) {
	accepted := map[netip.Addr]netlink.Route{}
	if len(f.added) > addrBurstWindow && slices.ContainsFunc(f.added, byProxy) {
		if accepted, err = localRoutes(takeoverTable); err != nil {
			return next, false, err
		}
	}
	isAccepted := func(a netip.Addr) bool { _, ok := accepted[a]; return ok }
	// A proxied address the takeover routes accept is announced before
	// its proxy entry is made: the advertisement moves every client that
	// already has a neighbour entry for it (the router in front, every
	// client of a failover), and what those send is accepted at once.
	// The entry only answers solicitations, from new clients and from
	// the unicast probes of moved ones, which come no sooner than
	// delay_first_probe_time (5 s) after their next packet; it lands
	// within the sync. At 2500 addresses the entries take the kernel
	// ~0.2 s alone and ~0.5 s on a loaded node (docs/benchmarks.md,
	// issue 17), the advertisements a few milliseconds.
	announcedFirst := func(a netip.Addr) bool { return byProxy(a) && isAccepted(a) }
	early, _ := partition(f.added, announcedFirst)
	var errs []error
	var told time.Time
	if len(early) > 0 {
		errs = append(errs, announce(link, early, 1))
		told = l.announcedAt(early)
		next = told.Add(onnode.GARPDelay)
	}
	var routeLater []netip.Addr
	// The rest is announced window by window as each answers: the
	// kernel's cost of an IPv6 address grows with the addresses already
	// on the interface (~1 ms each at 2500 here, docs/benchmarks.md), so
	// the first addresses answer long before the last are added.
	ifindex := link.Attrs().Index
	for start := 0; start < len(f.added); start += addrBurstWindow {
		window := f.added[start:min(start+addrBurstWindow, len(f.added))]
		asProxy, asAddr := partition(window, byProxy)
		later, first := partition(asProxy, isAccepted)
		routeLater = append(routeLater, later...)
		if err := errors.Join(addrBurst(ifindex, asAddr, true), localRouteBurst(first), proxyBurst(ifindex, asProxy, true)); err != nil {
			return next, false, errors.Join(append(errs, err)...)
		}
		_, unannounced := partition(window, announcedFirst)
		if len(unannounced) > 0 {
			errs = append(errs, announce(link, unannounced, 1))
		}
		for _, a := range window {
			f.here[a] = true
		}
		if len(unannounced) > 0 {
			told = l.announcedAt(unannounced)
			next = told.Add(onnode.GARPDelay)
		}
	}
	// The first round's other repeats once every window answers: one
	// advertisement each is what moves the clients, so the last window
	// does not wait for the repeats of all before it.
	if len(f.added) > 0 && onnode.GARPRepeat > 1 {
		errs = append(errs, announce(link, f.added, onnode.GARPRepeat-1))
	}
	errs = append(errs, localRouteBurst(routeLater))
	if len(f.added) > 0 && l.log != nil {
		// What a failover's debugging starts from: how long after the
		// sync began every address was announced, and was in place.
		l.log.Info("Service addresses added", "interface", link.Attrs().Name, "added", len(f.added),
			"announced_first", len(early), "announced_ms", told.Sub(began).Milliseconds(),
			"done_ms", time.Since(began).Milliseconds())
	}
	return next, true, errors.Join(errs...)
}

// announcedAt records the first round of addrs as sent now, and returns
// the time.
func (l *LocalVIPs) announcedAt(addrs []netip.Addr) time.Time {
	at := time.Now()
	for _, a := range addrs {
		l.announced[a] = announcement{rounds: 1, last: at}
	}
	return at
}

// announceDueRounds announces what dueAnnouncements picked: due in full
// rounds, refresh once each.
func announceDueRounds(link netlink.Link, due, refresh []netip.Addr) error {
	return errors.Join(announce(link, due, onnode.GARPRepeat), announce(link, refresh, onnode.GARPRefreshRepeat))
}

// dueAnnouncements picks the addresses of wanted to announce at now,
// records them in announced, and tells when the next one is due (zero:
// none): due are announced in full rounds (GARPRepeat; an address again
// GARPDelay after its first round), refresh once each (GARPRefreshRepeat),
// every held address each refreshPeriod. Refreshes go out together: once
// one is due, every address refreshed more than half its period ago goes
// with it. Addresses added at many different times (Services created one
// by one, a bulk over a minute) would otherwise each wake a sync of their
// own every period, and a sync lists every address and local route: at
// 1000 Services that was most of an idle sidecar's CPU
// (docs/benchmarks.md). They settle into one or two rounds a period.
func dueAnnouncements(announced map[netip.Addr]announcement, wanted map[netip.Addr]bool, now time.Time) (due, refresh []netip.Addr, next time.Time) {
	batch := false
	for a := range wanted {
		if an := announced[a]; an.rounds >= 2 && now.Sub(an.last) >= an.refreshPeriod() {
			batch = true
			break
		}
	}
	for a := range wanted {
		an := announced[a]
		period := an.refreshPeriod()
		if batch {
			period -= period / 2
		}
		switch {
		case an.rounds == 0:
		case an.rounds == 1 && now.Sub(an.last) >= onnode.GARPDelay:
		case an.rounds >= 2 && now.Sub(an.last) >= period:
		default:
			wait := an.last.Add(an.refreshPeriod())
			if an.rounds == 1 {
				wait = an.last.Add(onnode.GARPDelay)
			}
			if next.IsZero() || wait.Before(next) {
				next = wait
			}
			continue
		}
		if an.rounds >= 2 {
			refresh = append(refresh, a)
		} else {
			due = append(due, a)
		}
		done := announcement{rounds: an.rounds + 1, last: now}
		announced[a] = done
		wait := now.Add(done.refreshPeriod())
		if an.rounds == 0 {
			wait = now.Add(onnode.GARPDelay)
		}
		if next.IsZero() || wait.Before(next) {
			next = wait
		}
	}
	slices.SortFunc(due, netip.Addr.Compare)
	slices.SortFunc(refresh, netip.Addr.Compare)
	return due, refresh, next
}

// partition splits addrs into those that satisfy f and the rest.
func partition(addrs []netip.Addr, f func(netip.Addr) bool) (yes, no []netip.Addr) {
	for _, a := range addrs {
		if f(a) {
			yes = append(yes, a)
		} else {
			no = append(no, a)
		}
	}
	return yes, no
}

// announcement is how often an address was announced, and when last.
type announcement struct {
	rounds int
	last   time.Time
}

// refreshPeriod is how long after its last announcement an address held
// since is refreshed: GARPRefresh for its first GARPRefreshEarly
// refreshes (its two full rounds come first), GARPRefreshSettled after.
func (an announcement) refreshPeriod() time.Duration {
	if an.rounds < 2+onnode.GARPRefreshEarly {
		return onnode.GARPRefresh
	}
	return onnode.GARPRefreshSettled
}

// addrBurstWindow is how many requests go out before their
// acknowledgements are read: enough to keep the kernel busy, few enough
// that the acknowledgements fit the socket's receive buffer.
const addrBurstWindow = 64

// addrBurst adds (or removes) host addresses on an interface over one
// netlink socket (nlBurst): IPv6 ones without duplicate address detection
// (IFA_F_NODAD, as keepalived adds its VIPs), so they are usable at once.
// Each is marked as not the node's own, as keepalived's VIPs are
// (onnode.VIPLabel): IPv4 ones with that label, IPv6 ones deprecated.
// An address already there is replaced, one already gone is no error.
// Call it inside the namespace.
func addrBurst(ifindex int, addrs []netip.Addr, add bool) error {
	return nlBurst(addrs, func(a netip.Addr) *nl.NetlinkRequest { return addrRequest(ifindex, a, add) }, add, "address")
}

func addrRequest(ifindex int, a netip.Addr, add bool) *nl.NetlinkRequest {
	proto, flags := unix.RTM_DELADDR, unix.NLM_F_ACK
	if add {
		proto, flags = unix.RTM_NEWADDR, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE
	}
	req := nl.NewNetlinkRequest(proto, flags)
	family := unix.AF_INET
	if a.Is6() {
		family = unix.AF_INET6
	}
	msg := nl.NewIfAddrmsg(family)
	msg.Index = uint32(ifindex)
	msg.Prefixlen = uint8(a.BitLen())
	msg.Scope = unix.RT_SCOPE_UNIVERSE
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFA_LOCAL, a.AsSlice()))
	req.AddData(nl.NewRtAttr(unix.IFA_ADDRESS, a.AsSlice()))
	switch {
	case !add:
	case a.Is4():
		req.AddData(nl.NewRtAttr(unix.IFA_LABEL, nl.ZeroTerminated(onnode.VIPLabel)))
	default:
		msg.Flags = unix.IFA_F_NODAD
		req.AddData(nl.NewRtAttr(unix.IFA_FLAGS, nl.Uint32Attr(unix.IFA_F_NODAD)))
		// Valid for ever, preferred lifetime 0 (left zero): deprecated,
		// as keepalived leaves its /128 VIPs.
		life := nl.IfaCacheInfo{IfaCacheinfo: unix.IfaCacheinfo{Valid: infiniteLifetime}}
		req.AddData(nl.NewRtAttr(unix.IFA_CACHEINFO, life.Serialize()))
	}
	return req
}

// infiniteLifetime is the kernel's "forever" for an address lifetime.
const infiniteLifetime = 0xffffffff

// Announce is announce on the interface named iface (the sidecar's
// healing, pkg/sidecar/heal.go). Call it inside the namespace.
func Announce(iface string, addrs []netip.Addr, rounds int) error {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return err
	}
	return announce(link, addrs, rounds)
}

// announce tells the segment that addrs are now at link's hardware
// address: rounds gratuitous ARP requests for each IPv4 address, rounds
// unsolicited neighbour advertisements (Override set, to all nodes) for
// each IPv6 one; keepalived sends GARPRepeat for a new master's VIPs.
// Call it inside the namespace.
func announce(link netlink.Link, addrs []netip.Addr, rounds int) error {
	mac := link.Attrs().HardwareAddr
	if len(mac) != 6 {
		return nil // no Ethernet address to announce (lo, a tunnel)
	}
	ifindex := link.Attrs().Index
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	return errors.Join(sendGARPs(ifindex, mac, v4, rounds), sendNAs(ifindex, mac, v6, rounds))
}

func sendGARPs(ifindex int, mac net.HardwareAddr, addrs []netip.Addr, rounds int) error {
	if len(addrs) == 0 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(linklayer.Htons(unix.ETH_P_ARP)))
	if err != nil {
		return fmt.Errorf("gratuitous ARP socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: linklayer.Htons(unix.ETH_P_ARP), Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for round := 0; round < rounds; round++ {
		for _, a := range addrs {
			if err := unix.Sendto(fd, linklayer.ARPRequest(mac, a, a, linklayer.Broadcast), 0, to); err != nil {
				return fmt.Errorf("gratuitous ARP for %s: %w", a, err)
			}
		}
	}
	return nil
}

func sendNAs(ifindex int, mac net.HardwareAddr, addrs []netip.Addr, rounds int) error {
	if len(addrs) == 0 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return fmt.Errorf("neighbour advertisement socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	// Hop limit 255, or receivers drop it (RFC 4861 7.1.2); the kernel
	// fills in the ICMPv6 checksum. Freebind: an address answered by a
	// proxy entry (proxyndp.go) is not on the interface, and is the
	// source all the same.
	if err := errors.Join(unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 255),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_FREEBIND, 1),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifindex),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 0)); err != nil {
		return fmt.Errorf("neighbour advertisement socket: %w", err)
	}
	to := &unix.SockaddrInet6{Addr: netip.MustParseAddr("ff02::1").As16(), ZoneId: uint32(ifindex)}
	for round := 0; round < rounds; round++ {
		for _, a := range addrs {
			// The address itself is the source: it is on the interface
			// (without DAD) or proxied, while a link-local one may still
			// be tentative.
			pi := unix.Inet6Pktinfo{Addr: a.As16(), Ifindex: uint32(ifindex)}
			oob := unix.PktInfo6(&pi)
			if err := unix.Sendmsg(fd, linklayer.NeighbourAdvertisement(mac, a), oob, to, 0); err != nil {
				return fmt.Errorf("neighbour advertisement for %s: %w", a, err)
			}
		}
	}
	return nil
}

// announceDue sends the announcements due at now (a new address's
// second round, the refreshes) without a sync, and tells whether it
// could: it lists the interface's addresses only, to see which anchors
// are held, and leaves everything to a sync (false) unless the addresses
// those call for are exactly those the follower announced, which a sync
// or an early sync added. A sync lists every address, proxy entry and
// local route (tens of milliseconds at 5000 Services) and holds mu
// meanwhile: an early sync for a Service created then waited for it, a
// second after the last one's (docs/benchmarks.md).
func (l *LocalVIPs) announceDue(now time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := false
	err := l.t.InNetns(func() error {
		link, onIf, err := hostAddrs(l.h.Interface, len(l.announced) > 0)
		if err != nil || link == nil {
			return nil
		}
		wanted := map[netip.Addr]bool{}
		for _, in := range l.h.Instances {
			if !slices.ContainsFunc(in.Anchors, func(a netip.Addr) bool { return onIf[a] }) {
				continue
			}
			for _, a := range in.Sidecar {
				if _, ok := l.announced[a]; !ok {
					return nil
				}
				wanted[a] = true
			}
		}
		if len(wanted) != len(l.announced) {
			return nil
		}
		done = true
		due, refresh, next := dueAnnouncements(l.announced, wanted, now)
		if !next.IsZero() {
			l.wakeAt(next)
		}
		return announceDueRounds(link, due, refresh)
	})
	return done, err
}

// earlySync adds and announces the addresses AddEarly left whose anchor
// was on the interface at the last sync, without listing what the node
// has: a new Service's address costs a few requests here whatever the
// number of addresses held, where a sync lists every address, proxy
// entry and local route (at 5000 Services, on every Service added). An
// IPv6 address proxied (proxyndp.go) gets its local route and entry,
// like one the takeover routes do not accept yet. The requests replace
// what is there, so an address a sync added meanwhile is left as it is.
// The next sync (the render's, an address change's, a due announcement's)
// checks everything as ever, this address too.
func (l *LocalVIPs) earlySync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	taken := l.takePending()
	l.earlyMu.Lock()
	held := l.anchorsHeld
	l.earlyMu.Unlock()
	var add []netip.Addr
	for _, e := range taken {
		if _, done := l.announced[e.addr]; !done && held[e.anchor] {
			add = append(add, e.addr)
		}
	}
	if len(add) == 0 {
		return nil
	}
	began := time.Now()
	err := l.t.InNetns(func() error {
		link, err := netlink.LinkByName(l.h.Interface)
		if err != nil {
			return fmt.Errorf("VRRP interface %s: %w", l.h.Interface, err)
		}
		ifindex := link.Attrs().Index
		proxy := slices.ContainsFunc(add, netip.Addr.Is6) && l.proxyMode(link)
		asProxy, asAddr := partition(add, func(a netip.Addr) bool { return proxy && a.Is6() })
		if err := errors.Join(addrBurst(ifindex, asAddr, true), localRouteBurst(asProxy), proxyBurst(ifindex, asProxy, true)); err != nil {
			return err
		}
		err = announce(link, add, onnode.GARPRepeat)
		at := time.Now()
		for _, a := range add {
			l.announced[a] = announcement{rounds: 1, last: at}
		}
		// The second round is due then; a sync already due sooner
		// sends it when its time comes.
		if second := at.Add(onnode.GARPDelay); !l.wakeDue.After(at) || second.Before(l.wakeDue) {
			l.wakeAt(second)
		}
		if l.log != nil {
			l.log.Info("Service addresses added", "interface", link.Attrs().Name, "added", len(add), "ahead_of_render", true,
				"done_ms", time.Since(began).Milliseconds())
		}
		return err
	})
	if l.addrsChanged != nil {
		l.addrsChanged()
	}
	return err
}
