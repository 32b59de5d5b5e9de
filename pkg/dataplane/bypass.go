package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// ResetBypassing resets the node's own TCP connections to a redirected
// VIP:port that the redirect did not turn to haproxy, and returns how many
// it reset. Such a connection was opened before the redirect table was
// there (the kubelet's or kube-proxy's, started with the node before
// vipctl's pod, or while a restarting pod had removed the table): it goes
// over the network to the VIP's holder. Once this node takes the VIP, the
// connection's packets stay on the node and the holder's answers, from
// an address the node now has, are dropped as martians; a client that
// only waits (a watch) notices nothing until its own health check gives
// up, half a minute and more for client-go, and meanwhile sees no change
// of the cluster. kube-proxy on such a node kept sending Service traffic
// to endpoints that were gone (the cluster lab's rolling upgrade found
// it). A reset client reconnects at once, through the redirect to the
// node's own haproxy, which no VIP move touches.
//
// The node's TCP sockets connected to a redirected VIP:port are found by
// sock_diag; one is kept when conntrack says the redirect turned it (its
// answer comes from haproxy's port), every other one is reset with
// SOCK_DESTROY, which needs a kernel built with CONFIG_INET_DIAG_DESTROY
// (an error says so; nothing else changes).
func ResetBypassing(t host.Target, redirects []onnode.PortRedirect) (int, error) {
	if len(redirects) == 0 {
		return 0, nil
	}
	reset := 0
	err := t.InNetns(func() error {
		var errs []error
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := netlink.SocketDiagTCP(family)
			if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
				return fmt.Errorf("sock_diag: %w", err)
			}
			var turned map[[2]netip.AddrPort]bool
			for _, s := range socks {
				local, remote, ok := toVIP(s, redirects)
				if !ok {
					continue
				}
				if turned == nil {
					if turned, err = redirected(family, redirects); err != nil {
						return err
					}
				}
				if turned[[2]netip.AddrPort{local, remote}] {
					continue
				}
				done, err := resetSocket(local, remote)
				if errors.Is(err, unix.EOPNOTSUPP) {
					return err
				}
				if err != nil {
					errs = append(errs, err)
				}
				if done {
					reset++
				}
			}
		}
		return errors.Join(errs...)
	})
	return reset, err
}

// toVIP tells whether the socket is an established TCP connection to a
// redirected VIP:port, and its two ends.
func toVIP(s *netlink.Socket, redirects []onnode.PortRedirect) (local, remote netip.AddrPort, ok bool) {
	if s.State != netlink.TCP_ESTABLISHED {
		return local, remote, false
	}
	src, ok1 := netip.AddrFromSlice(s.ID.Source)
	dst, ok2 := netip.AddrFromSlice(s.ID.Destination)
	if !ok1 || !ok2 {
		return local, remote, false
	}
	src, dst = src.Unmap(), dst.Unmap()
	for _, r := range redirects {
		if dst == r.VIP && s.ID.DestinationPort == r.From {
			return netip.AddrPortFrom(src, s.ID.SourcePort), netip.AddrPortFrom(dst, r.From), true
		}
	}
	return local, remote, false
}

// redirected are the connections (local, VIP:port) of the family that
// conntrack saw turned by a redirect: their answer comes from another
// port than the one asked.
func redirected(family uint8, redirects []onnode.PortRedirect) (map[[2]netip.AddrPort]bool, error) {
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(family))
	if err != nil {
		return nil, fmt.Errorf("conntrack: %w", err)
	}
	out := map[[2]netip.AddrPort]bool{}
	for _, f := range flows {
		if f.Forward.Protocol != unix.IPPROTO_TCP {
			continue
		}
		src, ok1 := netip.AddrFromSlice(f.Forward.SrcIP)
		dst, ok2 := netip.AddrFromSlice(f.Forward.DstIP)
		if !ok1 || !ok2 {
			continue
		}
		src, dst = src.Unmap(), dst.Unmap()
		for _, r := range redirects {
			if dst == r.VIP && f.Forward.DstPort == r.From && f.Reverse.SrcPort == r.To {
				out[[2]netip.AddrPort{netip.AddrPortFrom(src, f.Forward.SrcPort), netip.AddrPortFrom(dst, r.From)}] = true
			}
		}
	}
	return out, nil
}

// resetSocket resets one socket of a dump (destroySocket) and says
// whether it did: one closed since the dump is no error, a kernel that
// cannot destroy sockets is (EOPNOTSUPP, the same for every socket).
func resetSocket(local, remote netip.AddrPort) (bool, error) {
	switch err := destroySocket(local, remote); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return false, fmt.Errorf("resetting %s -> %s: the kernel cannot destroy sockets (CONFIG_INET_DIAG_DESTROY): %w", local, remote, err)
	default:
		return false, fmt.Errorf("resetting %s -> %s: %w", local, remote, err)
	}
}

// destroySocket resets the TCP socket local -> remote of the current
// network namespace (SOCK_DESTROY on an inet_diag socket: what `ss -K`
// does), for either family.
func destroySocket(local, remote netip.AddrPort) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	family := byte(unix.AF_INET)
	if local.Addr().Is6() {
		family = unix.AF_INET6
	}
	// struct nlmsghdr (16) + struct inet_diag_req_v2 (56).
	msg := make([]byte, 16+56)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], 21) // SOCK_DESTROY
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	req := msg[16:]
	req[0], req[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[4:], 0xffffffff) // every state
	id := req[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	copy(id[4:20], local.Addr().AsSlice())
	copy(id[20:36], remote.Addr().AsSlice())
	binary.NativeEndian.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	// One nlmsgerr: struct nlmsghdr, then the error (0: done).
	if n >= 20 && binary.NativeEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[16:])); code != 0 {
			return unix.Errno(-code)
		}
		return nil
	}
	return errors.New("no answer to SOCK_DESTROY")
}
