package lab

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestPollerGivesUpDials: a poller's request that times out takes its
// connection attempt with it. net/http dials on after the request gave
// up, and through a long outage thousands of attempts piled up, each
// retransmitting its SYN after a second, and connected at once when the
// address came back: BenchmarkPeersScale then saw the first answer three
// seconds after the handshakes. An address nobody answers is polled
// longer than a SYN's first retransmission: no SYN is sent again (the
// client's namespace counts its own from zero). labprobe's poller
// (probe.Poll) dials through the same probe.Transport.
func TestPollerGivesUpDials(t *testing.T) {
	l := netlab.New(t)
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	// No host has 198.51.100.50: a dial left running sends its SYN
	// again a second after it began.
	p := StartPolling(client, "http://198.51.100.50:8080/", 20*time.Millisecond, PollTimeout, true)
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
