package lab

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestPollerGivesUpDials: a poller's request that times out takes its
// connection attempt with it. net/http dials on after the request gave
// up, and through a long outage thousands of attempts piled up, each
// retransmitting its SYN after a second, and connected at once when the
// address came back: BenchmarkPeersScale then saw the first answer three
// seconds after the handshakes. A lost server is polled longer than a
// SYN's first retransmission: no SYN is sent again (the client's
// namespace counts its own from zero). labprobe's poller
// (probe.Poll) dials through the same probe.Transport.
func TestPollerGivesUpDials(t *testing.T) {
	l := netlab.New(t)
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	server := l.AddHost("server", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	// The client knows the server's address, then the server is gone
	// (its switch port dropped, as in a node loss): SYNs leave, nothing
	// answers, and a dial left running sends its SYN again a second
	// after it began.
	server.Serve("198.51.100.11:8080", func(net.Conn) {})
	c, err := client.DialContext(context.Background(), "tcp", "198.51.100.11:8080")
	if err != nil {
		t.Fatal(err)
	}
	// The server closes first; both ends' FIN and ACK are through long
	// before the port drops (nothing of that connection is sent again).
	_, _ = io.ReadAll(c)
	_ = c.Close()
	time.Sleep(100 * time.Millisecond)
	server.LinkDown()
	p := StartPolling(client, "http://198.51.100.11:8080/", 20*time.Millisecond, PollTimeout, true)
	time.Sleep(1800 * time.Millisecond)
	again := tcpRetrans(client)
	ok, failed := p.Stop()
	if ok != 0 || failed < 20 {
		t.Fatalf("%d answered and %d failed; want none answered and dozens failed", ok, failed)
	}
	if again != 0 {
		t.Errorf("%d SYNs sent again after their requests timed out", again)
	}
}
