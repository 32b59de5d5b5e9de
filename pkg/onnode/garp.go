package onnode

import "time"

// Gratuitous ARP and unsolicited neighbour advertisements of a new
// master, as keepalived.conf sets them (vrrp_garp_master_*) and as the
// sidecar repeats them for the Service addresses it adds (announce:
// sidecar): GARPRepeat at once, as many again GARPDelay later, and every
// address again each GARPRefresh while held, GARPRefreshRepeat times
// (keepalived's default vrrp_garp_master_refresh_repeat).
//
// keepalived refreshes its few VIPs each GARPRefresh for as long as it
// holds them. The sidecar, which may hold thousands of Service
// addresses, does so for the first GARPRefreshEarly refreshes after an
// address came to the node (five minutes: past a switch's default MAC
// ageing of 300 s, long enough to repair a cache that missed the move),
// and then each GARPRefreshSettled: every advertisement costs each node
// on the segment that holds IPv6 addresses a walk of its multicast groups
// (docs/benchmarks.md), and a cache that missed the move has long been
// repaired or has expired.
const (
	GARPRepeat         = 3
	GARPDelay          = time.Second
	GARPRefresh        = 60 * time.Second
	GARPRefreshRepeat  = 1
	GARPRefreshEarly   = 5
	GARPRefreshSettled = 10 * time.Minute
)
