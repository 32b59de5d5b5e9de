package lab

import (
	"context"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A request can time out at the client for two reasons the client alone
// can tell apart. Either the network lost something on the way (a
// segment unacknowledged, the client retransmitting), or the server has
// the request and has not answered: the client's socket shows every byte
// of the request acknowledged and not one segment sent twice. Through a
// Service address that kube-proxy sends on to a pod, that acknowledgement
// is the pod's own kernel's, so the request reached the workload and the
// workload is slow: on the lab's two shared cores an echo pod with the
// smallest CPU weight waited 2.2 s to run once while a node's pods were
// evicted and started (2026-11-30, captured at the client, the VIP's
// holder and the pod's node: the request acknowledged by the pod at once,
// the answer sent 2.2 s later). Such a request is the workload's, not the
// VIP's: StartPollingHeld's pollers wait for its answer up to a longer
// limit and count it answered, late, and a request that the network did
// lose still fails at the timeout.

// connected records the request's connection, once dialed.
func (r *requestTrace) connected(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn = c
	r.local = c.LocalAddr().String()
	r.stage = "connected"
}

// deadline bounds one request: timeout, or held for a request the
// server holds (heldByServer) when held is set. done releases it.
func (r *requestTrace) deadline(ctx context.Context, timeout, held time.Duration) (context.Context, func()) {
	if held == 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, max(held, timeout))
	t := time.AfterFunc(timeout, func() {
		if !r.heldByServer() {
			cancel()
		}
	})
	return ctx, func() { t.Stop(); cancel() }
}

// heldByServer tells, once the timeout passed, whether the request was
// written, acknowledged in full and nothing of it retransmitted, with no
// answer begun: the server holds it. It remembers a yes (wasHeld).
func (r *requestTrace) heldByServer() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage != "request written" || r.conn == nil {
		return false
	}
	info, err := tcpInfo(r.conn)
	if err != nil || info.Unacked != 0 || info.Total_retrans != 0 {
		return false
	}
	r.held = true
	return true
}

// wasHeld tells whether the request outlived the timeout, held by the
// server.
func (r *requestTrace) wasHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// tcpInfo reads the kernel's TCP_INFO of a connection.
func tcpInfo(c net.Conn) (*unix.TCPInfo, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return nil, err
	}
	return info, ierr
}

// logLate logs the answers that came after the timeout to requests the
// server held: the workload's slowness, shown, not judged.
func (p *Poller) logLate(t testing.TB, what string) {
	t.Helper()
	p.mu.Lock()
	late := slices.Clone(p.late)
	p.mu.Unlock()
	if len(late) > 0 {
		t.Logf("%s: %d answers came late, the request acknowledged by the server and nothing retransmitted (the workload's, not the VIP's):\n%s",
			what, len(late), strings.Join(late, "\n"))
	}
}
