package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// The new master's first milliseconds, over IPv6. keepalived adds a VIP
// and sends its unsolicited neighbour advertisements at once, but the
// kernel makes an IPv6 address deliverable only when its DAD work has run
// on a kernel worker, even with nodad: until then a packet for the VIP is
// not local (in a namespace, right after the add, a route lookup was not
// local in 180 to 431 of 2000 tries on an idle machine). A client that
// heard the advertisement sends its next SYN to the new master, which
// drops it, and the client waits a second to send it again (the capture
// behind TestPlannedHandoverDualStack's rare lost request: SYN 3 ms after
// the advertisements, no answer, the retransmission answered).
//
// So every node routes the IPv6 VIPs of its instances as local for what
// arrives on the VRRP interface: a rule "iif <VRRP interface> lookup
// takeoverTable" and in that table a local route per VIP. Only packets
// addressed to a VIP reach a node, and only once a client has heard that
// node advertise it (neighbour discovery answers for addresses, never for
// routes), so the routes change nothing until the node takes a VIP over,
// and then close the gap. The node's own traffic to a VIP is not from the
// interface and is routed as before. IPv4 has no gap (an address is local
// as soon as it is added) and must not get such routes: ARP answers for
// any address routed as local, so every node would claim every VIP.

// takeoverTable is the routing table of those routes; takeoverRulePriority
// puts its rule after the local table's and before main's.
const (
	takeoverTable        = 0x7676
	takeoverRulePriority = 0x76
)

// ApplyTakeoverRoutes makes the rule and routes match h's IPv6 VIPs;
// without any, it removes them.
func ApplyTakeoverRoutes(t host.Target, h onnode.Handover) error {
	return NewTakeoverWriter(t).Apply(h)
}

// TakeoverWriter applies takeover routes as ApplyTakeoverRoutes does,
// but once it has read the table it changes only the difference from its
// last success: a sync runs for every Service added, and reading a table
// of thousands of routes each time was a fifth of a loaded node's sync
// (docs/benchmarks.md). It reads the rule and the table again at least
// every LocalResync (a route someone else removed), after a failure, and
// when the interface changes.
type TakeoverWriter struct {
	t     host.Target
	iface string
	have  map[netip.Addr]bool // nil: read the table first
	read  time.Time
}

// NewTakeoverWriter writes t's takeover routes.
func NewTakeoverWriter(t host.Target) *TakeoverWriter { return &TakeoverWriter{t: t} }

// Apply makes the rule and routes match h's IPv6 VIPs; without any, it
// removes them.
func (w *TakeoverWriter) Apply(h onnode.Handover) error {
	want := map[netip.Addr]bool{}
	for _, in := range h.Instances {
		for _, v := range in.VIPs {
			if v.Is6() {
				want[v] = true
			}
		}
	}
	iface := h.Interface
	if len(want) == 0 {
		iface = ""
	}
	now := time.Now()
	known := w.have != nil && w.iface == iface && now.Sub(w.read) < LocalResync
	err := w.t.InNetns(func() error {
		have := w.have
		if !known {
			if err := ensureTakeoverRule(iface); err != nil {
				return err
			}
			routes, err := localRoutes(takeoverTable)
			if err != nil {
				return err
			}
			have = map[netip.Addr]bool{}
			for ip, r := range routes {
				if !want[ip] {
					if err := delLocalRoute(r); err != nil {
						return err
					}
					continue
				}
				have[ip] = true
			}
		}
		var add, del []netip.Addr
		for vip := range have {
			if !want[vip] {
				del = append(del, vip)
			}
		}
		for vip := range want {
			if !have[vip] {
				add = append(add, vip)
			}
		}
		if len(add)+len(del) == 0 {
			return nil
		}
		l, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		lo := l.Attrs().Index
		for _, vip := range del {
			if err := delLocalRoute(*takeoverRoute(lo, vip)); err != nil {
				return err
			}
		}
		for _, vip := range add {
			if err := netlink.RouteAdd(takeoverRoute(lo, vip)); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("takeover route for %s: %w", vip, err)
			}
		}
		return nil
	})
	if err != nil {
		w.have = nil
		return err
	}
	if !known {
		w.read, w.iface = now, iface
	}
	w.have = want
	return nil
}

// takeoverRoute is vip's local route in takeoverTable.
func takeoverRoute(lo int, vip netip.Addr) *netlink.Route {
	r := localRoute(lo, vip)
	r.Table, r.Priority = takeoverTable, 0
	return r
}

// ensureTakeoverRule leaves exactly one IPv6 rule to takeoverTable, for
// packets arriving on iface; none when iface is empty.
func ensureTakeoverRule(iface string) error {
	rules, err := netlink.RuleListFiltered(netlink.FAMILY_V6, &netlink.Rule{Table: takeoverTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing IPv6 rules: %w", err)
	}
	found := false
	for _, r := range rules {
		if iface != "" && !found && r.IifName == iface && r.Priority == takeoverRulePriority {
			found = true
			continue
		}
		if err := netlink.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing rule to table %d: %w", takeoverTable, err)
		}
	}
	if found || iface == "" {
		return nil
	}
	r := netlink.NewRule()
	r.Family, r.Table, r.Priority, r.IifName = netlink.FAMILY_V6, takeoverTable, takeoverRulePriority, iface
	if err := netlink.RuleAdd(r); err != nil {
		return fmt.Errorf("rule iif %s lookup %d: %w", iface, takeoverTable, err)
	}
	return nil
}
