package lab

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab/probe"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestProbeProcesses runs labprobe's echo server in one namespace and its
// poller in another: every request to the server is answered with its
// name (over IPv6 and IPv4: it listens on [::]), every one to a closed
// port fails without a handshake, and the poller's records survive its
// SIGTERM.
func TestProbeProcesses(t *testing.T) {
	l := netlab.New(t)
	server := l.AddHost("server", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	bin := BuildProbe(t)
	StartEchoProcess(t, bin, server, "[::]:8080", "server")
	v6, v4, closed := "http://[2001:db8:100::11]:8080/", "http://198.51.100.11:8080/", "http://[2001:db8:100::11]:8081/"
	p := StartPollProcess(t, bin, client, []string{v6, v4, closed}, 50*time.Millisecond)
	WaitFor(t, 10*time.Second, "5 answers over each family", func() bool {
		a := probe.Answered(p.Records(t))
		return a[v6] >= 5 && a[v4] >= 5
	})
	requests := map[string]int{}
	for _, r := range p.Stop(t) {
		if r.Kind != probe.KindRequest {
			continue
		}
		requests[r.URL]++
		want := r.URL != closed
		if r.OK != want || r.Handshake != want || (want && r.Body != "server") {
			t.Errorf("%+v: want ok and handshake %v, body %q when ok", r, want, "server")
		}
	}
	if requests[closed] < 5 {
		t.Errorf("%d requests to the closed port; want as many as to the server's (%d)", requests[closed], requests[v6])
	}
}
