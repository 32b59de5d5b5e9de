package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// abortConnections resets the TCP connections of the current network
// namespace whose local address is addr, a VIP whose local route just
// lapsed, and returns how many it reset. Every such connection is dead:
// packets to the VIP now leave for its new holder, which knows none of
// them. A remote client learns that at its next segment, which the new
// holder resets; a client on this node that reached the VIP while the
// node held it does not: its source is the VIP too (a local destination
// is its own source), both ends of its connection are here, and the new
// holder's resets go to the VIP, that is to the holder itself. Such a
// client (kube-proxy or the kubelet through api-int on a control-plane
// node) waits for its own timeout, half a minute and more for client-go's
// HTTP/2 health check, and meanwhile follows a watch that delivers
// nothing: in the cluster lab kube-proxy kept sending Service traffic to
// pods gone since a cold start (docs/lab.md). Reset, each side gets an
// error at once and the client reconnects, to the VIP's new holder.
//
// Listeners are kept (a daemon may listen on the VIP with IP_FREEBIND);
// as ResetBypassing, this needs CONFIG_INET_DIAG_DESTROY.
func abortConnections(addr netip.Addr) (int, error) {
	reset := 0
	var errs []error
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		socks, err := netlink.SocketDiagTCP(family)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return reset, fmt.Errorf("sock_diag: %w", err)
		}
		for _, s := range socks {
			local, remote, ok := fromAddr(s, addr)
			if !ok {
				continue
			}
			done, err := resetSocket(local, remote)
			if errors.Is(err, unix.EOPNOTSUPP) {
				return reset, err
			}
			if err != nil {
				errs = append(errs, err)
			}
			if done {
				reset++
			}
		}
	}
	return reset, errors.Join(errs...)
}

// fromAddr tells whether the socket is a TCP connection (neither a
// listener nor one in TIME_WAIT or CLOSE) whose local address is addr,
// and its two ends.
func fromAddr(s *netlink.Socket, addr netip.Addr) (local, remote netip.AddrPort, ok bool) {
	switch s.State {
	case netlink.TCP_LISTEN, netlink.TCP_TIME_WAIT, netlink.TCP_CLOSE:
		return local, remote, false
	}
	src, ok1 := netip.AddrFromSlice(s.ID.Source)
	dst, ok2 := netip.AddrFromSlice(s.ID.Destination)
	if !ok1 || !ok2 || src.Unmap() != addr {
		return local, remote, false
	}
	return netip.AddrPortFrom(src.Unmap(), s.ID.SourcePort), netip.AddrPortFrom(dst.Unmap(), s.ID.DestinationPort), true
}

// isLocalAddr tells whether addr is on an interface of the current
// network namespace; a failed listing says yes, which ends nothing.
func isLocalAddr(addr netip.Addr) bool {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return true
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
			return true
		}
	}
	return false
}
