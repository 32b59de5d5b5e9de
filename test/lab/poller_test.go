package lab

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
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

// TestPollerHeldByServer: a held poller (StartPollingHeld) counts a late
// answer to a request the server acknowledged as answered, late, where a
// plain poller fails it at the timeout; a request the network loses (its
// segments dropped at the server, the client retransmitting) fails at
// the timeout all the same.
func TestPollerHeldByServer(t *testing.T) {
	l := netlab.New(t)
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	server := l.AddHost("server", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	const timeout, held = 300 * time.Millisecond, 3 * time.Second
	// The server reads the request, then answers 800 ms later.
	server.Serve("198.51.100.11:8080", func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		time.Sleep(800 * time.Millisecond)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	url := "http://198.51.100.11:8080/"
	run := func(p *Poller) (ok, failed int, errs []string) {
		time.Sleep(2 * time.Second)
		ok, failed = p.Stop()
		return ok, failed, p.Errors()
	}
	if ok, failed, errs := run(StartPollingHeld(client, url, 50*time.Millisecond, timeout, held)); ok == 0 || failed != 0 {
		t.Errorf("held poller of a slow server: %d answered, %d failed (%v); want all answered, late", ok, failed, errs)
	}
	if ok, failed, _ := run(StartPolling(client, url, 50*time.Millisecond, timeout, false)); ok != 0 || failed == 0 {
		t.Errorf("plain poller of a slow server: %d answered, %d failed; want every request failed at the timeout", ok, failed)
	}
	// Now the server's namespace drops every segment that carries data
	// to it: the handshake completes, the request never arrives.
	for _, args := range [][]string{
		{"nft", "add", "table", "inet", "lossy"},
		{"nft", "add", "chain", "inet", "lossy", "in", "{ type filter hook input priority 0; }"},
		{"nft", "add", "rule", "inet", "lossy", "in", "tcp", "dport", "8080", "ip", "length", ">", "100", "drop"},
	} {
		if out, err := server.Exec(args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	ok, failed, errs := run(StartPollingHeld(client, url, 50*time.Millisecond, timeout, held))
	if ok != 0 || failed == 0 {
		t.Fatalf("held poller, request segments dropped: %d answered, %d failed; want every request failed", ok, failed)
	}
	for _, e := range errs {
		if strings.Contains(e, "held by the server") {
			t.Errorf("a lost request taken for one the server held: %s", e)
		}
	}
}

// TestFlowsStory: the capture tells a failed request's connection packet
// by packet, the server named by its link-layer address: here the server
// reads the request and resets the connection.
func TestFlowsStory(t *testing.T) {
	l := netlab.New(t)
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	server := l.AddHost("server", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	server.Serve("198.51.100.11:8080", func(c net.Conn) {
		_, _ = bufio.NewReader(c).ReadString('\n')
		_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
	})
	flows := StartFlows(t, client, 8080)
	time.Sleep(500 * time.Millisecond) // tcpdump listening
	p := StartPolling(client, "http://198.51.100.11:8080/", 100*time.Millisecond, time.Second, false)
	time.Sleep(time.Second)
	if ok, failed := p.Stop(); ok != 0 || failed == 0 {
		t.Fatalf("%d answered, %d failed; want every request reset", ok, failed)
	}
	time.Sleep(200 * time.Millisecond) // the capture written
	errs, starts := p.Errors(), p.FailedStarts()
	got := flows.Story(errs[0], "198.51.100.11:8080", starts[0], 3*time.Second, map[string]string{server.MAC(): "server"})
	t.Logf("%s\n%s", errs[0], got)
	for _, want := range []string{"198.51.100.100:", "+0.0 out S;", " server S.;", " out P. ", " server R"} {
		if !strings.Contains(got, want) {
			t.Errorf("story %q lacks %q", got, want)
		}
	}
	// A dial refused: the error names no connection, the capture has the
	// SYN and the server's reset.
	flows = StartFlows(t, client, 8081)
	atServer := StartFlows(t, server, 8081)
	time.Sleep(500 * time.Millisecond)
	p = StartPolling(client, "http://198.51.100.11:8081/", 100*time.Millisecond, time.Second, false)
	time.Sleep(500 * time.Millisecond)
	if ok, failed := p.Stop(); ok != 0 || failed == 0 {
		t.Fatalf("%d answered, %d failed; want every dial refused", ok, failed)
	}
	time.Sleep(200 * time.Millisecond)
	errs, starts = p.Errors(), p.FailedStarts()
	got = flows.Story(errs[0], "198.51.100.11:8081", starts[0], time.Second, map[string]string{server.MAC(): "server"})
	t.Logf("%s\n%s", errs[0], got)
	for _, want := range []string{"no connection: 198.51.100.100:", "+0.0 out S;", " server R."} {
		if !strings.Contains(got, want) {
			t.Errorf("story %q lacks %q", got, want)
		}
	}
	if n := strings.Count(got, " out S"); n != 1 {
		t.Errorf("story %q tells %d SYNs, want the one of the dial that started then", got, n)
	}
	// The same SYN in the server's capture, by its sequence number, and
	// the reset that answered it.
	seq, ok := flows.DialSYN(errs[0], "198.51.100.11:8081", starts[0], time.Second)
	if !ok {
		t.Fatalf("no SYN found for the refused dial %q", errs[0])
	}
	followed := atServer.Follow(seq)
	t.Logf("SYN %d at the server: %s", seq, followed)
	for _, want := range []string{" In 198.51.100.100.", " > 198.51.100.11.8081 S;", " Out 198.51.100.11.8081 > 198.51.100.100.", " R."} {
		if !strings.Contains(followed, want) {
			t.Errorf("followed %q lacks %q", followed, want)
		}
	}
	if got := atServer.Follow(seq + 7); got != "" {
		t.Errorf("another sequence number followed: %q, want nothing", got)
	}
	if _, ok := flows.DialSYN(errs[0], "198.51.100.11:8081", starts[0].Add(time.Hour), time.Second); ok {
		t.Errorf("a SYN found an hour after the dial")
	}
}
