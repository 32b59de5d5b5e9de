package preflight

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/linklayer"
)

// Each address is asked for askRounds times, askSpacing apart: a request
// lost on the way, or an answer, must not make a held address look free.
const (
	askRounds  = 3
	askSpacing = 200 * time.Millisecond
)

// Ask sends ARP requests (IPv4) and neighbour solicitations (IPv6) for
// addrs on ifi and returns, per address, every link-layer address heard
// claiming it until d after the last request: an ARP reply or any ARP
// packet sent from the address (its holder's gratuitous ARP), a neighbour
// advertisement for it. This host's own frames do not count. It needs
// CAP_NET_RAW; the interface is left as it was.
func Ask(ctx context.Context, ifi *net.Interface, addrs []netip.Addr, d time.Duration) (map[netip.Addr][]net.HardwareAddr, error) {
	return AskRounds(ctx, ifi, addrs, askRounds, d)
}

// AskRounds is Ask with rounds questions per address (at least one),
// askSpacing apart: the sidecar's watch of the wire (pkg/sidecar) asks
// once and again only for the addresses nobody answered.
func AskRounds(ctx context.Context, ifi *net.Interface, addrs []netip.Addr, rounds int, d time.Duration) (map[netip.Addr][]net.HardwareAddr, error) {
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("interface %s has no Ethernet address to ask from", ifi.Name)
	}
	want := map[netip.Addr]bool{}
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		want[a] = true
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	fd, err := linklayer.PacketSocket(ifi)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	var ns int
	if len(v6) > 0 {
		if ns, err = nsSocket(ifi.Index); err != nil {
			return nil, err
		}
		defer func() { _ = unix.Close(ns) }()
	}
	srcs, err := ipv4Sources(ifi)
	if err != nil {
		return nil, err
	}

	l := &listener{fd: fd, ifi: ifi, want: want, heard: map[netip.Addr][]net.HardwareAddr{}, stop: make(chan struct{})}
	var reader sync.WaitGroup
	reader.Go(l.listen)
	sendErr := solicit(ctx, fd, ns, ifi, srcs, v4, v6, max(rounds, 1), d)
	close(l.stop)
	reader.Wait()
	if err := errors.Join(sendErr, l.err); err != nil {
		return nil, err
	}
	return l.heard, nil
}

// listener collects, from a packet socket, who claims the wanted
// addresses (ARP replies, neighbour advertisements), other than ifi
// itself, until stop is closed.
type listener struct {
	fd   int
	ifi  *net.Interface
	want map[netip.Addr]bool
	stop chan struct{}
	// heard and err are read once listen has returned.
	heard map[netip.Addr][]net.HardwareAddr
	err   error
}

func (l *listener) listen() {
	buf := make([]byte, 2048)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		n, from, err := unix.Recvfrom(l.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			l.err = fmt.Errorf("reading from %s: %w", l.ifi.Name, err)
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		a, mac, ok := parseClaim(buf[:n])
		if !ok || !l.want[a] || slices.Equal(mac, l.ifi.HardwareAddr) {
			continue
		}
		if !slices.ContainsFunc(l.heard[a], func(m net.HardwareAddr) bool { return slices.Equal(m, mac) }) {
			l.heard[a] = append(l.heard[a], slices.Clone(mac))
		}
	}
}

// solicit asks rounds times, askSpacing apart, who has each address
// (ARP requests on fd, neighbour solicitations on ns), then waits d for
// late answers.
func solicit(ctx context.Context, fd, ns int, ifi *net.Interface, srcs ipv4Prefixes, v4, v6 []netip.Addr, rounds int, d time.Duration) error {
	to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: linklayer.Htons(unix.ETH_P_ARP), Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for round := range rounds {
		if round > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(askSpacing):
			}
		}
		for _, a := range v4 {
			if err := unix.Sendto(fd, linklayer.ARPRequest(ifi.HardwareAddr, srcs.of(a), a, nil), 0, to); err != nil {
				return fmt.Errorf("ARP request for %s: %w", a, err)
			}
		}
		for _, a := range v6 {
			dst := &unix.SockaddrInet6{Addr: linklayer.SolicitedNode(a).As16(), ZoneId: uint32(ifi.Index)}
			if err := unix.Sendto(ns, linklayer.NeighbourSolicitation(ifi.HardwareAddr, a), 0, dst); err != nil {
				return fmt.Errorf("neighbour solicitation for %s: %w", a, err)
			}
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	return nil
}

// nsSocket is an ICMPv6 socket that sends neighbour solicitations out of
// ifindex: hop limit 255, or receivers drop them (RFC 4861 7.1.1); the
// kernel fills in the checksum and a link-local source.
func nsSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return -1, fmt.Errorf("neighbour solicitation socket: %w", err)
	}
	if err := errors.Join(unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 255),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifindex),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 0)); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("neighbour solicitation socket: %w", err)
	}
	return fd, nil
}

// ipv4Prefixes are the interface's IPv4 subnets, to ask from the
// interface's own address where it has one on the asked address's subnet.
type ipv4Prefixes []netip.Prefix

func ipv4Sources(ifi *net.Interface) (ipv4Prefixes, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	var out ipv4Prefixes
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		ones, _ := n.Mask.Size()
		if ok && ip.Unmap().Is4() {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out, nil
}

// of is the sender address for a request for a: the interface's own
// address on a's subnet, or 0.0.0.0 (an ARP probe, RFC 5227, which
// holders answer as well) when it has none there.
func (ps ipv4Prefixes) of(a netip.Addr) netip.Addr {
	for _, p := range ps {
		if p.Masked().Contains(a) && p.Addr() != a {
			return p.Addr()
		}
	}
	return netip.IPv4Unspecified()
}

// parseClaim reads an Ethernet frame that says "a is at mac": an ARP
// packet sent from a (a reply, or its holder's gratuitous ARP), or a
// neighbour advertisement for a (its target link-layer address option,
// else the frame's source).
func parseClaim(f []byte) (a netip.Addr, mac net.HardwareAddr, ok bool) {
	if len(f) < 14 {
		return a, nil, false
	}
	payload := f[14:]
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_ARP:
		if len(payload) < 28 || binary.BigEndian.Uint16(payload[0:2]) != 1 || binary.BigEndian.Uint16(payload[2:4]) != unix.ETH_P_IP || payload[4] != 6 || payload[5] != 4 {
			return a, nil, false
		}
		a = netip.AddrFrom4([4]byte(payload[14:18]))
		return a, net.HardwareAddr(payload[8:14]), !a.IsUnspecified()
	case unix.ETH_P_IPV6:
		// Neighbour discovery carries no extension headers.
		if len(payload) < 40+24 || payload[0]>>4 != 6 || payload[6] != unix.IPPROTO_ICMPV6 || payload[40] != 136 {
			return a, nil, false
		}
		a = netip.AddrFrom16([16]byte(payload[48:64]))
		mac = net.HardwareAddr(f[6:12])
		for opts := payload[64:]; len(opts) >= 8 && opts[1] > 0 && len(opts) >= int(opts[1])*8; opts = opts[int(opts[1])*8:] {
			if opts[0] == 2 && opts[1] == 1 {
				mac = net.HardwareAddr(opts[2:8])
			}
		}
		return a, mac, true
	}
	return a, nil, false
}
