package vrid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/linklayer"
)

// Listen captures VRRP advertisements on iface for d (or until ctx ends)
// and returns every router seen, once each, and how many adverts came. It
// opens a packet socket with promiscuous membership, so unicast VRRP
// between other hosts is seen too; the kernel drops the membership when
// the socket closes, leaving the interface as it was. It needs
// CAP_NET_RAW. An interface this host lacks is ErrNoInterface.
func Listen(ctx context.Context, iface string, d time.Duration) (*Capture, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("%w %s (%w)", ErrNoInterface, iface, err)
	}
	fd, err := linklayer.PacketSocket(ifi)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return nil, fmt.Errorf("promiscuous mode on %s: %w", iface, err)
	}
	// Short read timeouts let the loop notice the deadline and ctx.
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(d)
	buf := make([]byte, 65536)
	var seen []Observation
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, fmt.Errorf("reading from %s: %w", iface, err)
		}
		if obs, ok := ParseFrame(buf[:n]); ok {
			seen = append(seen, obs)
		}
	}
	listened := d
	if ctx.Err() != nil {
		listened = time.Since(start).Round(100 * time.Millisecond)
	}
	return &Capture{Interface: iface, For: listened, Adverts: len(seen), Routers: dedupe(seen)}, nil
}
