package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// IPv6 Service addresses of a pool with announce: sidecar, without an
// address on the interface. The kernel's cost of adding an IPv6 address
// to an Ethernet interface grows with the addresses already there: the
// node that took over 2551 of them needed 30 s to add them
// (docs/benchmarks.md, issue 17). A node needs an address for two things
// only: to accept packets for it, which a local route does as well
// (table local, what the handover's kept routes already are), and to
// answer neighbour solicitations for it, which the kernel also does for a
// proxy neighbour entry. 5000 of each take 0.16 s and 0.27 s.
//
// The kernel answers for proxy entries on an interface only with
// forwarding on for it and proxy_ndp on (for it, or for all), settings
// the sidecar cannot make: IPv6 has no rtnetlink call for them and
// /proc/sys is read-only in its container. The MachineConfig sets them
// (render.SysctlFiles); where they are off, the addresses go on the
// interface as before. The third setting, proxy_delay (an answer to a
// multicast solicitation for a proxy entry waits a random time up to
// it, 0.8 s by default), the sidecar sets to 0 itself over rtnetlink.

// proxyEntries lists vipctl's IPv6 proxy neighbour entries (protocol
// localRouteProtocol, as its local routes) on an interface (0: on every
// interface). Others' entries are not vipctl's to change.
func proxyEntries(ifindex int) (map[netip.Addr]bool, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETNEIGH, unix.NLM_F_DUMP)
	req.AddData(&netlink.Ndmsg{Family: unix.AF_INET6, Flags: netlink.NTF_PROXY})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNEIGH)
	if err != nil {
		return nil, fmt.Errorf("listing proxy neighbour entries: %w", err)
	}
	out := map[netip.Addr]bool{}
	for _, m := range msgs {
		var hdr netlink.Ndmsg
		if len(m) < hdr.Len() {
			continue
		}
		family, index, flags := m[0], binary.NativeEndian.Uint32(m[4:8]), m[10]
		if family != unix.AF_INET6 || flags&netlink.NTF_PROXY == 0 || (ifindex != 0 && index != uint32(ifindex)) {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[hdr.Len():])
		if err != nil {
			return nil, fmt.Errorf("listing proxy neighbour entries: %w", err)
		}
		var a netip.Addr
		ours := false
		for _, at := range attrs {
			switch at.Attr.Type {
			case unix.NDA_DST:
				a, _ = netip.AddrFromSlice(at.Value)
			case netlink.NDA_PROTOCOL:
				ours = len(at.Value) == 1 && at.Value[0] == byte(localRouteProtocol)
			}
		}
		if ours && a.Is6() {
			out[a] = true
		}
	}
	return out, nil
}

// proxyMode tells whether IPv6 Service addresses are answered by proxy
// entries on link, from the node's settings, and logs when that changes.
// On the way in it sets the interface's proxy_delay to 0.
func (l *LocalVIPs) proxyMode(link netlink.Link) bool {
	iface := link.Attrs().Name
	why := proxyNDPOff(iface)
	if why == "" && ipv6NeighSetting(iface, "proxy_delay") != "0" {
		if err := setProxyDelay(link.Attrs().Index, 0); err != nil {
			why = err.Error()
		}
	}
	on := why == ""
	if l.log != nil && (l.proxying == nil || *l.proxying != on) {
		if on {
			l.log.Info("IPv6 Service addresses are answered by proxy neighbour entries and local routes", "interface", iface)
		} else {
			l.log.Info("IPv6 Service addresses go on the interface as addresses (slower for thousands)", "interface", iface, "because", why)
		}
	}
	l.proxying = &on
	return on
}

// proxyNDPOff says why the kernel would not answer neighbour
// solicitations for proxy entries on iface, or "" if it would. Call it
// inside the namespace: /proc/sys/net shows the calling thread's.
func proxyNDPOff(iface string) string {
	conf := func(dev, key string) string {
		data, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + dev + "/" + key)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(data))
	}
	if v := conf(iface, "forwarding"); v != "1" {
		return fmt.Sprintf("net.ipv6.conf.%s.forwarding is %s, not 1", iface, v)
	}
	if all, dev := conf("all", "proxy_ndp"), conf(iface, "proxy_ndp"); all != "1" && dev != "1" {
		return fmt.Sprintf("net.ipv6.conf.all.proxy_ndp is %s and net.ipv6.conf.%s.proxy_ndp %s, neither 1", all, iface, dev)
	}
	return ""
}

func ipv6NeighSetting(iface, key string) string {
	data, err := os.ReadFile("/proc/sys/net/ipv6/neigh/" + iface + "/" + key)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// Neighbour table attributes (linux/neighbour.h).
const (
	ndtaName        = 1
	ndtaParms       = 6
	ndtpaIfindex    = 1
	ndtpaProxyDelay = 13
)

// setProxyDelay sets an interface's IPv6 proxy_delay (RTM_SETNEIGHTBL:
// CAP_NET_ADMIN is enough).
func setProxyDelay(ifindex int, ms uint64) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETNEIGHTBL, unix.NLM_F_ACK)
	req.AddData(ndtmsg{family: unix.AF_INET6})
	req.AddData(nl.NewRtAttr(ndtaName, nl.ZeroTerminated("ndisc_cache")))
	parms := nl.NewRtAttr(ndtaParms, nil)
	parms.AddRtAttr(ndtpaIfindex, nl.Uint32Attr(uint32(ifindex)))
	parms.AddRtAttr(ndtpaProxyDelay, nl.Uint64Attr(ms))
	req.AddData(parms)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("setting proxy_delay of interface %d: %w", ifindex, err)
	}
	return nil
}

// ndtmsg is struct ndtmsg: the family and padding.
type ndtmsg struct{ family uint8 }

func (m ndtmsg) Len() int          { return 4 }
func (m ndtmsg) Serialize() []byte { return []byte{m.family, 0, 0, 0} }

// proxyBurst adds (or removes) vipctl's IPv6 proxy entries on an
// interface. Call it inside the namespace.
func proxyBurst(ifindex int, addrs []netip.Addr, add bool) error {
	return nlBurst(addrs, func(a netip.Addr) *nl.NetlinkRequest { return proxyRequest(ifindex, a, add) }, add, "proxy entry for")
}

// localRouteBurst adds localRoute for each address (what syncRoutes
// keeps for a held VIP), in one burst. Call it inside the namespace.
func localRouteBurst(addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return nil
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return nlBurst(addrs, func(a netip.Addr) *nl.NetlinkRequest { return localRouteRequest(lo.Attrs().Index, a) }, true, "local route for")
}

// localRouteRequest adds localRoute(lo, a), replacing one that is there.
func localRouteRequest(lo int, a netip.Addr) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(unix.RTM_NEWROUTE, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	r := localRoute(lo, a)
	msg := nl.NewRtMsg()
	msg.Family = unix.AF_INET6
	if a.Is4() {
		msg.Family = unix.AF_INET
	}
	msg.Dst_len = uint8(a.BitLen())
	msg.Table = uint8(r.Table)
	msg.Protocol = uint8(r.Protocol)
	msg.Scope = uint8(r.Scope)
	msg.Type = uint8(r.Type)
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.RTA_DST, a.AsSlice()))
	req.AddData(nl.NewRtAttr(unix.RTA_OIF, nl.Uint32Attr(uint32(lo))))
	req.AddData(nl.NewRtAttr(unix.RTA_PRIORITY, nl.Uint32Attr(uint32(r.Priority))))
	return req
}

func proxyRequest(ifindex int, a netip.Addr, add bool) *nl.NetlinkRequest {
	proto, flags := unix.RTM_DELNEIGH, unix.NLM_F_ACK
	if add {
		proto, flags = unix.RTM_NEWNEIGH, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE
	}
	req := nl.NewNetlinkRequest(proto, flags)
	req.AddData(&netlink.Ndmsg{Family: unix.AF_INET6, Index: uint32(ifindex), State: netlink.NUD_PERMANENT, Flags: netlink.NTF_PROXY})
	req.AddData(nl.NewRtAttr(unix.NDA_DST, a.AsSlice()))
	if add {
		req.AddData(nl.NewRtAttr(netlink.NDA_PROTOCOL, []byte{byte(localRouteProtocol)}))
	}
	return req
}

// nlBurst sends one request per address over one netlink socket,
// addrBurstWindow at a time before their acknowledgements are read. On
// the way out, what is already gone is no error. what names the object
// in errors ("adding proxy entry for 2001:db8::1: ...").
func nlBurst(addrs []netip.Addr, build func(netip.Addr) *nl.NetlinkRequest, add bool, what string) error {
	if len(addrs) == 0 {
		return nil
	}
	s, err := nl.Subscribe(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer s.Close()
	var errs []error
	for start := 0; start < len(addrs); start += addrBurstWindow {
		window := addrs[start:min(start+addrBurstWindow, len(addrs))]
		pending := map[uint32]netip.Addr{}
		for _, a := range window {
			req := build(a)
			if err := s.Send(req); err != nil {
				return fmt.Errorf("netlink send: %w", err)
			}
			pending[req.Seq] = a
		}
		for len(pending) > 0 {
			msgs, _, err := s.Receive()
			if err != nil {
				return fmt.Errorf("netlink receive: %w", err)
			}
			for _, m := range msgs {
				if m.Header.Type != unix.NLMSG_ERROR {
					continue
				}
				a, ok := pending[m.Header.Seq]
				if !ok {
					continue
				}
				delete(pending, m.Header.Seq)
				if len(m.Data) < 4 {
					continue
				}
				errno := -int32(binary.NativeEndian.Uint32(m.Data[:4]))
				switch {
				case errno == 0:
				case !add && (errno == int32(unix.EADDRNOTAVAIL) || errno == int32(unix.ENOENT) || errno == int32(unix.ESRCH)):
				default:
					verb := "adding"
					if !add {
						verb = "removing"
					}
					errs = append(errs, fmt.Errorf("%s %s %s: %w", verb, what, a, syscall.Errno(errno)))
				}
			}
		}
	}
	return errors.Join(errs...)
}
