package netlab

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Segment is a TCP segment with SYN or RST set, as a host's interface
// saw it (in or out).
type Segment struct {
	At             time.Time
	SrcMAC, DstMAC string
	Src, Dst       netip.AddrPort
	SYN, ACK, RST  bool
}

// Segments records the SYN and RST segments of one TCP port a host sends
// and receives: who opened connections to whom, who answered, where a
// handshake stopped.
type Segments struct {
	mu   sync.Mutex
	segs []Segment
}

// CaptureSegments records h's segments to or from port until the test
// ends.
func (h *Host) CaptureSegments(t testing.TB, port uint16) *Segments {
	t.Helper()
	fd := h.packetSocket(t)
	s := &Segments{}
	h.readFrames(t, fd, func(f []byte, at time.Time) {
		if seg, ok := parseSegment(f, port); ok {
			seg.At = at
			s.mu.Lock()
			s.segs = append(s.segs, seg)
			s.mu.Unlock()
		}
	})
	return s
}

// Since is every segment recorded at or after t, in order.
func (s *Segments) Since(t time.Time) []Segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Segment
	for _, seg := range s.segs {
		if !seg.At.Before(t) {
			out = append(out, seg)
		}
	}
	return out
}

func parseSegment(f []byte, port uint16) (Segment, bool) {
	if len(f) < 14 {
		return Segment{}, false
	}
	seg := Segment{DstMAC: net.HardwareAddr(f[0:6]).String(), SrcMAC: net.HardwareAddr(f[6:12]).String()}
	var tcp []byte
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_IP:
		ip := f[14:]
		if len(ip) < 20 || ip[9] != unix.IPPROTO_TCP {
			return Segment{}, false
		}
		hl := int(ip[0]&0x0f) * 4
		if len(ip) < hl+20 {
			return Segment{}, false
		}
		tcp = ip[hl:]
		seg.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(tcp[0:2]))
		seg.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(tcp[2:4]))
	case unix.ETH_P_IPV6:
		ip := f[14:]
		if len(ip) < 40+20 || ip[6] != unix.IPPROTO_TCP {
			return Segment{}, false
		}
		tcp = ip[40:]
		seg.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8:24])), binary.BigEndian.Uint16(tcp[0:2]))
		seg.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[24:40])), binary.BigEndian.Uint16(tcp[2:4]))
	default:
		return Segment{}, false
	}
	flags := tcp[13]
	seg.SYN, seg.ACK, seg.RST = flags&0x02 != 0, flags&0x10 != 0, flags&0x04 != 0
	if (!seg.SYN && !seg.RST) || (seg.Src.Port() != port && seg.Dst.Port() != port) {
		return Segment{}, false
	}
	return seg, true
}
