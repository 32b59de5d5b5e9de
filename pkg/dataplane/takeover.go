package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/render"
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
func ApplyTakeoverRoutes(t host.Target, h render.Handover) error {
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
	return t.InNetns(func() error {
		if err := ensureTakeoverRule(iface); err != nil {
			return err
		}
		have, err := localRoutes(takeoverTable)
		if err != nil {
			return err
		}
		for ip, r := range have {
			if want[ip] {
				delete(want, ip)
				continue
			}
			if err := delLocalRoute(r); err != nil {
				return err
			}
		}
		if len(want) == 0 {
			return nil
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for vip := range want {
			r := localRoute(lo.Attrs().Index, vip)
			r.Table, r.Priority = takeoverTable, 0
			if err := netlink.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("takeover route for %s: %w", vip, err)
			}
		}
		return nil
	})
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
