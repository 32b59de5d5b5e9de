package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// localRouteProtocol marks vipctl's local routes for VIPs (rtnetlink protocol
// numbers up to 255 are free for routing daemons; this one is vipctl's).
const localRouteProtocol = netlink.RouteProtocol(0x76)

// localRouteMetric keeps the route apart from the kernel's own local route
// for the address, which has metric 0 and leaves with the address.
const localRouteMetric = 0x76

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
// sync 0.3 s of CPU (BenchmarkScale's profile). Where the kernel filters
// dumps (strict checking, Linux 4.20), it is asked for vipctl's routes of
// table alone: table local also holds the kernel's route for every
// address on the node, thousands more to copy and skip, and the
// sidecar's repair sync (LocalResync) dumped them every minute.
func localRoutes(table int) (map[netip.Addr]netlink.Route, error) {
	out := map[netip.Addr]netlink.Route{}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		err := dumpRoutes(family, table, func(m []byte) {
			if r, ok := parseLocalRoute(m, table); ok {
				ip, _ := netip.AddrFromSlice(r.Dst.IP)
				out[ip.Unmap()] = r
			}
		})
		if err != nil {
			return nil, fmt.Errorf("listing vipctl's local routes: %w", err)
		}
	}
	return out, nil
}

// dumpRoutes hands each route of family that the kernel dumps to fn:
// with strict checking, only vipctl's of table (none when the table does
// not exist), else all of them.
func dumpRoutes(family, table int, fn func(m []byte)) error {
	s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.SetReceiveTimeout(&nl.SocketTimeoutTv); err != nil {
		return err
	}
	strict := unix.SetsockoptInt(s.GetFd(), unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1) == nil
	req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}
	msg := &nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(family)}}
	if strict {
		msg.Protocol = uint8(localRouteProtocol)
		if table < 256 {
			msg.Table = uint8(table)
		}
	}
	req.AddData(msg)
	if strict && table >= 256 {
		req.AddData(nl.NewRtAttr(unix.RTA_TABLE, nl.Uint32Attr(uint32(table))))
	}
	err = req.ExecuteIter(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE, func(m []byte) bool {
		fn(m)
		return true
	})
	if strict && errors.Is(err, unix.ENOENT) {
		return nil // no such table: no routes in it
	}
	return err
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
