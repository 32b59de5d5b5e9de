package netlab

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Announcements records the gratuitous ARP requests and unsolicited
// neighbour advertisements a host receives: who (sender hardware address)
// said each address is where, and when each address was first heard.
type Announcements struct {
	mu    sync.Mutex
	seen  map[netip.Addr][]Heard
	first map[netip.Addr]time.Time
}

// Heard is one announcement: the sender's hardware address, and when.
type Heard struct {
	MAC string
	At  time.Time
}

// CaptureAnnouncements records what h hears on its interface until the
// test ends. The socket's buffer holds thousands of announcements sent at
// once (a takeover of a pool's addresses).
func (h *Host) CaptureAnnouncements(t testing.TB) *Announcements {
	t.Helper()
	fd := h.packetSocket(t)
	c := &Announcements{seen: map[netip.Addr][]Heard{}, first: map[netip.Addr]time.Time{}}
	h.readFrames(t, fd, func(f []byte, at time.Time) {
		if a, mac, ok := parseAnnouncement(f); ok {
			c.mu.Lock()
			if len(c.seen[a]) == 0 {
				c.first[a] = at
			}
			c.seen[a] = append(c.seen[a], Heard{MAC: mac, At: at})
			c.mu.Unlock()
		}
	})
	return c
}

// packetSocket opens a socket that receives every frame h's interface
// sends and receives, with a buffer for thousands sent at once (a
// takeover of a pool's addresses).
func (h *Host) packetSocket(t testing.TB) int {
	t.Helper()
	proto := int(htons(unix.ETH_P_ALL))
	var fd int
	if err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
		if err != nil {
			return err
		}
		link, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: link.Index})
	}); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatal(err)
	}
	return fd
}

// readFrames hands each frame fd receives to each, with when the kernel
// received it, until the test ends; then it closes fd.
func (h *Host) readFrames(t testing.TB, fd int, each func(f []byte, at time.Time)) {
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		oob := make([]byte, 128)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
			if err != nil {
				continue
			}
			each(buf[:k], receivedAt(oob[:oobn]))
		}
	}()
	t.Cleanup(func() { close(stop); <-done; _ = unix.Close(fd) })
}

// receivedAt reads SO_TIMESTAMPNS's time from a message's control data;
// now if it has none.
func receivedAt(oob []byte) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
				nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
				return time.Unix(sec, nsec)
			}
		}
	}
	return time.Now()
}

// parseAnnouncement reads a gratuitous ARP request (sender and target
// the same address) or an unsolicited neighbour advertisement to all
// nodes with the Override flag and a target link-layer address.
func parseAnnouncement(f []byte) (netip.Addr, string, bool) {
	if len(f) < 14 {
		return netip.Addr{}, "", false
	}
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_ARP:
		arp := f[14:]
		if len(arp) < 28 || binary.BigEndian.Uint16(arp[6:8]) != 1 {
			return netip.Addr{}, "", false
		}
		spa, tpa := netip.AddrFrom4([4]byte(arp[14:18])), netip.AddrFrom4([4]byte(arp[24:28]))
		return spa, net.HardwareAddr(arp[8:14]).String(), spa == tpa
	case unix.ETH_P_IPV6:
		ip6 := f[14:]
		if len(ip6) < 40+32 || ip6[6] != unix.IPPROTO_ICMPV6 || ip6[7] != 255 {
			return netip.Addr{}, "", false
		}
		dst := netip.AddrFrom16([16]byte(ip6[24:40]))
		icmp := ip6[40:]
		if icmp[0] != 136 || icmp[4]&0x20 == 0 || dst != netip.MustParseAddr("ff02::1") || icmp[24] != 2 {
			return netip.Addr{}, "", false
		}
		return netip.AddrFrom16([16]byte(icmp[8:24])), net.HardwareAddr(icmp[26:32]).String(), true
	}
	return netip.Addr{}, "", false
}

// Count is how many announcements of a naming mac (any, if nil) were heard.
func (c *Announcements) Count(a netip.Addr, mac net.HardwareAddr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for _, h := range c.seen[a] {
		if mac == nil || h.MAC == mac.String() {
			k++
		}
	}
	return k
}

// Heard is every announcement of a since the last Forget, in order.
func (c *Announcements) Heard(a netip.Addr) []Heard {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen[a])
}

// Wait waits up to d for at least want announcements of a at mac.
func (c *Announcements) Wait(a netip.Addr, mac net.HardwareAddr, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for c.Count(a, mac) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return c.Count(a, mac)
}

// First is when a was first heard since the last Forget (zero if never).
func (c *Announcements) First(a netip.Addr) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[a]
}

// LastFirst is when the last of addrs was first heard, once all of them
// were; the zero time until then.
func (c *Announcements) LastFirst(addrs []netip.Addr) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for _, a := range addrs {
		at, ok := c.first[a]
		if !ok {
			return time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// Forget drops what was heard so far.
func (c *Announcements) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.seen)
	clear(c.first)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
