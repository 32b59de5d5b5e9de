package vrid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/linklayer"
)

// Listen captures VRRP advertisements on iface for d (or until ctx ends)
// and returns every router seen, once each, and how many adverts came. It
// makes the interface promiscuous for as long, so unicast VRRP between
// other hosts is seen too (the kernel drops the membership when the
// socket closes, leaving the interface as it was), and it counts this
// host's own adverts as well. It needs CAP_NET_RAW. An interface this
// host lacks is ErrNoInterface.
func Listen(ctx context.Context, iface string, d time.Duration) (*Capture, error) {
	tap, err := OpenTap(iface, TapOptions{Promiscuous: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tap.Close() }()
	start := time.Now()
	var seen []Observation
	err = tap.Read(ctx, start.Add(d), func(a Advert) { seen = append(seen, a.Observation) })
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
		return nil, err
	}
	listened := d
	if ctx.Err() != nil {
		listened = time.Since(start).Round(100 * time.Millisecond)
	}
	return &Capture{Interface: iface, For: listened, Adverts: len(seen), Routers: dedupe(seen)}, nil
}

// TapOptions choose what a Tap hears besides the VRRP that arrives for
// this host.
type TapOptions struct {
	// Promiscuous makes the interface promiscuous while the tap is open:
	// unicast VRRP between other hosts is heard too, where the switch
	// floods it. Costly on a busy interface (the NIC passes every frame
	// up), so only for a bounded capture (Listen).
	Promiscuous bool
	// Outgoing also hears this host's own adverts. Without it the
	// kernel drops them before they reach the tap.
	Outgoing bool
	// Batch, when set, has Read take every advert queued after a wake
	// and then pause this long before it waits for the next: a node
	// that hears tens of adverts a second (the fast profile) wakes once
	// per Batch instead of once per advert. Adverts queue in the socket
	// meanwhile (its buffer holds hundreds). For a watcher that may
	// learn of an advert late (the sidecar's), not for a capture.
	Batch time.Duration
}

// Tap hears the VRRP advertisements of one interface. Its packet socket
// carries a classic BPF filter, so the kernel drops every other packet
// before it is copied to the socket: a node's other traffic costs the tap
// nothing, and it wakes only for VRRP.
type Tap struct {
	iface string
	f     *os.File
	buf   []byte
	batch time.Duration
	// wakes counts the reads that waited in the poller (tests).
	wakes int
}

// OpenTap opens a tap on iface in the current network namespace (call it
// on a thread inside the node's, host.Target.InNetns; reading may happen
// anywhere). Besides o.Promiscuous it joins the link-layer groups of
// VRRP's multicast addresses (224.0.0.18, ff02::12), so that a NIC that
// filters multicast passes the adverts of multicast routers even where no
// keepalived of this host joined them (unicast mode). It needs
// CAP_NET_RAW. An interface this host lacks is ErrNoInterface.
func OpenTap(iface string, o TapOptions) (*Tap, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("%w %s (%w)", ErrNoInterface, iface, err)
	}
	fd, err := linklayer.PacketSocket(ifi)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Tap, error) { _ = unix.Close(fd); return nil, err }
	filter, err := vrrpFilter(o.Outgoing)
	if err != nil {
		return fail(err)
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}); err != nil {
		return fail(fmt.Errorf("VRRP filter on %s: %w", iface, err))
	}
	// Frames queued between the socket's creation and the filter's
	// attachment were not filtered; the parser drops them.
	memberships := []unix.PacketMreq{
		multicastMreq(ifi, [6]byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x12}), // 224.0.0.18
		multicastMreq(ifi, [6]byte{0x33, 0x33, 0x00, 0x00, 0x00, 0x12}), // ff02::12
	}
	if o.Promiscuous {
		memberships = append(memberships, unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC})
	}
	for _, mreq := range memberships {
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fail(fmt.Errorf("membership on %s: %w", iface, err))
		}
	}
	// Non-blocking, the file is pollable: Read waits in the runtime's
	// poller with no periodic wake-up, and its deadline ends the wait.
	if err := unix.SetNonblock(fd, true); err != nil {
		return fail(err)
	}
	if o.Batch > 0 {
		// A second of a busy segment's adverts (best effort: the
		// kernel caps it at net.core.rmem_max).
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, tapBatchBuffer)
	}
	return &Tap{iface: iface, f: os.NewFile(uintptr(fd), "vrrp-tap-"+iface), buf: make([]byte, 65536), batch: o.Batch}, nil
}

func multicastMreq(ifi *net.Interface, mac [6]byte) unix.PacketMreq {
	m := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(m.Address[:], mac[:])
	return m
}

// Read calls fn with every advert the tap hears until ctx ends or until
// passes (the zero time: never), or reading fails (the interface went
// away). It returns os.ErrDeadlineExceeded when until passed and ctx's
// error when ctx ended.
func (t *Tap) Read(ctx context.Context, until time.Time, fn func(Advert)) error {
	if err := t.f.SetReadDeadline(until); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = t.f.SetReadDeadline(time.Now()) })
	defer stop()
	rc, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	// wait: the next read waits in the poller for an advert; else it
	// takes what is queued, and the queue drained, Read pauses (Batch).
	wait := true
	for {
		var n int
		var rerr error
		waited := false
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), t.buf, 0)
			if wait && errors.Is(rerr, unix.EAGAIN) {
				waited = true
				return false
			}
			return true
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return err
		case errors.Is(rerr, unix.EAGAIN):
			if err := t.pause(ctx, until); err != nil {
				return err
			}
			wait = true
			continue
		case errors.Is(rerr, unix.EINTR):
			continue
		case rerr != nil:
			return fmt.Errorf("reading from %s: %w", t.iface, rerr)
		}
		if waited {
			t.wakes++
		}
		wait = t.batch <= 0
		if a, ok := parseAdvert(t.buf[:n]); ok {
			fn(a)
		}
	}
}

// tapBatchBuffer is the receive buffer a batching tap asks for.
const tapBatchBuffer = 1 << 20

// pause waits the tap's Batch, or until ctx ends (its error) or until
// passes.
func (t *Tap) pause(ctx context.Context, until time.Time) error {
	d := t.batch
	if !until.IsZero() {
		d = min(d, time.Until(until))
	}
	if d <= 0 {
		return nil // the next read finds the deadline passed
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Close closes the tap; the kernel drops its memberships.
func (t *Tap) Close() error { return t.f.Close() }

// vrrpFilter is the tap's classic BPF program: it passes IPv4 and IPv6
// packets of IP protocol 112 (VRRP), 802.1Q-tagged too, and, unless
// outgoing, only those arriving at this host. The kernel runs it before
// copying a packet to the socket; everything else is dropped there.
func vrrpFilter(outgoing bool) ([]unix.SockFilter, error) {
	const (
		drop    = 0
		accept  = 0x40000 // the whole frame
		ipProto = 9       // offset of IPv4's protocol
		ip6Next = 6       // offset of IPv6's next header
		ethLen  = 14
		vlanLen = 4
	)
	var prog []bpf.Instruction
	if !outgoing {
		prog = append(prog,
			bpf.LoadExtension{Num: bpf.ExtType},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 1},
			bpf.RetConstant{Val: drop},
		)
	}
	// X is the 802.1Q tag's length, 0 or 4; the loads are relative to it.
	prog = append(prog,
		bpf.LoadConstant{Dst: bpf.RegX, Val: 0},
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeVLAN, SkipTrue: 2},
		bpf.LoadConstant{Dst: bpf.RegX, Val: vlanLen},
		bpf.LoadIndirect{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv4, SkipTrue: 2},
		bpf.LoadIndirect{Off: ethLen + ipProto, Size: 1},
		bpf.Jump{Skip: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 3},
		bpf.LoadIndirect{Off: ethLen + ip6Next, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: protoVRRP, SkipFalse: 1},
		bpf.RetConstant{Val: accept},
		bpf.RetConstant{Val: drop},
	)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}
