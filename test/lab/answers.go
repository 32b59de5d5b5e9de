package lab

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// FirstAnswers opens TCP connections from the client namespace to every
// address, over and over, until each has accepted one or timeout has
// passed, and returns when each first did (zero if it never did). A
// connection counts when the handshake completes: something on the
// network holds the address and serves the port.
//
// Thousands of addresses are probed at once from one goroutine with
// non-blocking sockets; the Poller's dials (Host.Do) pin an OS thread
// each. An attempt that has not been answered within retry is dropped and
// a new one started (a lost SYN is retransmitted only after 1 s), and as
// soon as the client learns a new link-layer address for one of the
// addresses (a gratuitous ARP or unsolicited neighbour advertisement
// from a new holder) its attempt is restarted at once, so the result is
// within a round trip of the address becoming reachable, not within
// retry.
func (lc *Cluster) FirstAnswers(addrs []netip.AddrPort, retry, timeout time.Duration) ([]time.Time, error) {
	index := make(map[netip.Addr]int, len(addrs))
	for i, a := range addrs {
		index[a.Addr().Unmap()] = i
	}
	neigh, stopNeigh, err := lc.subscribeNeighbours()
	if err != nil {
		return nil, err
	}
	defer stopNeigh()

	type attempt struct {
		fd      int
		started time.Time
	}
	first := make([]time.Time, len(addrs))
	next := make([]time.Time, len(addrs)) // zero: try now
	inFlight := map[int]attempt{}
	pending := len(addrs)
	drop := func(i int) {
		_ = unix.Close(inFlight[i].fd)
		delete(inFlight, i)
	}
	defer func() {
		for i := range inFlight {
			drop(i)
		}
	}()
	deadline := time.Now().Add(timeout)
	for pending > 0 && time.Now().Before(deadline) {
		now := time.Now()
	kicks:
		for {
			select {
			case a := <-neigh:
				if i, ok := index[a]; ok && first[i].IsZero() {
					if _, ok := inFlight[i]; ok {
						drop(i)
					}
					next[i] = time.Time{}
				}
			default:
				break kicks
			}
		}
		var start []int
		for i := range addrs {
			if !first[i].IsZero() {
				continue
			}
			if a, ok := inFlight[i]; ok && now.Sub(a.started) >= retry {
				drop(i)
			}
			if _, ok := inFlight[i]; !ok && !now.Before(next[i]) {
				start = append(start, i)
			}
		}
		if len(start) > 0 {
			// Sockets belong to the namespace they were made in; the
			// connect only sends the SYN, so one trip into the
			// namespace starts every attempt of the round.
			err := lc.Client.Do(func() error {
				for _, i := range start {
					fd, err := connectNonblocking(addrs[i])
					if err != nil {
						next[i] = now.Add(retry) // refused or unreachable at once
						continue
					}
					inFlight[i] = attempt{fd: fd, started: now}
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		fds := make([]unix.PollFd, 0, len(inFlight))
		which := make([]int, 0, len(inFlight))
		for i, a := range inFlight {
			fds = append(fds, unix.PollFd{Fd: int32(a.fd), Events: unix.POLLOUT})
			which = append(which, i)
		}
		if len(fds) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if _, err := unix.Poll(fds, 5); err != nil && err != unix.EINTR {
			return nil, fmt.Errorf("poll: %w", err)
		}
		done := time.Now()
		for k, p := range fds {
			if p.Revents == 0 {
				continue
			}
			i := which[k]
			soErr, err := unix.GetsockoptInt(int(p.Fd), unix.SOL_SOCKET, unix.SO_ERROR)
			started := inFlight[i].started
			drop(i)
			if err == nil && soErr == 0 {
				first[i] = done
				pending--
				continue
			}
			next[i] = started.Add(retry)
		}
	}
	return first, nil
}

// connectNonblocking starts a TCP handshake with a and returns the socket.
func connectNonblocking(a netip.AddrPort) (int, error) {
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
	if a.Addr().Unmap().Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().Unmap().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// subscribeNeighbours reports every address whose link-layer address the
// client (re)learns.
func (lc *Cluster) subscribeNeighbours() (<-chan netip.Addr, func(), error) {
	h, err := netns.GetFromName(lc.Client.NS)
	if err != nil {
		return nil, nil, err
	}
	updates := make(chan netlink.NeighUpdate, 4096)
	done := make(chan struct{})
	if err := netlink.NeighSubscribeWithOptions(updates, done, netlink.NeighSubscribeOptions{Namespace: &h}); err != nil {
		_ = h.Close()
		return nil, nil, err
	}
	out := make(chan netip.Addr, 4096)
	go func() {
		for u := range updates {
			a, ok := netip.AddrFromSlice(u.IP)
			if !ok || u.Type != unix.RTM_NEWNEIGH || len(u.HardwareAddr) == 0 {
				continue
			}
			select {
			case out <- a.Unmap():
			default: // a full channel only delays a restart to the next retry
			}
		}
	}()
	return out, func() { close(done); _ = h.Close() }, nil
}
