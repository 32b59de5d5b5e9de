package dataplane

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
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

// Drain starts a planned handover: the VIPs this node holds keep being
// served after they move (local routes, ARP settings), then the drain file
// drops every instance's priority to 1 so that peers take the VIPs over
// while this node still answers. keepalived may stop once they have.
func Drain(t host.Target, h onnode.Handover) error {
	l := NewLocalVIPs(t, HandoverGrace)
	l.SetHandover(h)
	if err := l.Sync(time.Now()); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	return t.WriteFlag(onnode.DrainFile, true)
}

// Undrain ends a drain, or cleans up after one that a stopped pod left:
// the drain file goes back to 0, every local route goes but those of
// proxied addresses (a proxy entry draws traffic that only its route
// accepts; a running LocalVIPs puts back those of the VIPs still held),
// the ARP settings are restored.
func Undrain(t host.Target) error {
	if err := t.WriteFlag(onnode.DrainFile, false); err != nil {
		return err
	}
	return t.InNetns(func() error {
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
