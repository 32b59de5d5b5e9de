package dataplane

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestLocalRoutesListsVipctlsAlone: in table local, beside the kernel's
// routes for the node's addresses and a route of another protocol,
// localRoutes finds vipctl's routes of both families and nothing else;
// in the takeover table, only the one there; and none, without an error,
// in the takeover table before it exists. The kernel filters the dump.
func TestLocalRoutesListsVipctlsAlone(t *testing.T) {
	lab := netlab.New(t)
	h := lab.AddHost("node", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	v4, v6 := netip.MustParseAddr("198.51.100.50"), netip.MustParseAddr("2001:db8:100::50")
	taken := netip.MustParseAddr("2001:db8:100::51")
	err := h.Do(func() error {
		if routes, err := localRoutes(takeoverTable); err != nil || len(routes) != 0 {
			t.Errorf("the takeover table before it exists: %v, %v; want no routes, no error", routes, err)
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, a := range []netip.Addr{v4, v6} {
			if err := netlink.RouteAdd(localRoute(lo.Attrs().Index, a)); err != nil {
				return err
			}
		}
		other := localRoute(lo.Attrs().Index, netip.MustParseAddr("198.51.100.60"))
		other.Protocol = unix.RTPROT_STATIC
		if err := netlink.RouteAdd(other); err != nil {
			return err
		}
		inTakeover := localRoute(lo.Attrs().Index, taken)
		inTakeover.Table = takeoverTable
		if err := netlink.RouteAdd(inTakeover); err != nil {
			return err
		}
		local, err := localRoutes(unix.RT_TABLE_LOCAL)
		if err != nil {
			return err
		}
		if len(local) != 2 || local[v4].Dst == nil || local[v6].Dst == nil {
			t.Errorf("table local: %v; want the routes for %s and %s alone", local, v4, v6)
		}
		if r := local[v6]; r.Dst != nil && (!r.Dst.IP.Equal(net.IP(v6.AsSlice())) || r.Priority != localRouteMetric || r.Table != unix.RT_TABLE_LOCAL) {
			t.Errorf("route for %s read as %+v", v6, r)
		}
		// The kernel sends vipctl's routes alone (strict checking), not
		// its own for the node's addresses as well.
		sent := 0
		if err := dumpRoutes(unix.AF_INET6, unix.RT_TABLE_LOCAL, func([]byte) { sent++ }); err != nil {
			return err
		}
		if sent != 1 {
			t.Errorf("the IPv6 dump of table local sent %d routes, want vipctl's one", sent)
		}
		takeover, err := localRoutes(takeoverTable)
		if err != nil {
			return err
		}
		if len(takeover) != 1 || takeover[taken].Table != takeoverTable {
			t.Errorf("takeover table: %v; want the route for %s alone", takeover, taken)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
