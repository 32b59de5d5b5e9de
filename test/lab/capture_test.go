package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestRefusalsNameTheRefuser: a connection to a port nobody listens on is
// refused with a reset; the recording holds it, from the server's address
// and MAC, within the window around the refused attempt, and nothing
// outside it.
func TestRefusalsNameTheRefuser(t *testing.T) {
	l := netlab.New(t)
	client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})
	server := l.AddHost("server", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	r := StartRefusals(t, client)
	time.Sleep(time.Second) // tcpdump attached
	at := time.Now()
	if _, err := client.DialContext(context.Background(), "tcp", "198.51.100.11:8081"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("dial to a closed port: %v, want refused", err)
	}
	mac := strings.TrimSpace(string(server.MustExec("cat", "/sys/class/net/"+server.Iface+"/address")))
	var got string
	WaitFor(t, 5*time.Second, "the reset recorded", func() bool {
		got = r.Around([]time.Time{at}, time.Second, 2*time.Second)
		return strings.Contains(got, "198.51.100.11.8081 > 198.51.100.100")
	})
	if !strings.Contains(got, mac) {
		t.Errorf("the reset's line lacks the server's MAC %s:\n%s", mac, got)
	}
	if old := r.Around([]time.Time{at.Add(-time.Hour)}, time.Second, time.Second); old != "" {
		t.Errorf("an hour before, the recording holds:\n%s", old)
	}
	// The one-line verdict names the sender and keeps the packet, and
	// holds only what the client received (no Out line: its own SYN is
	// not recorded, its own resets would be).
	who := r.Who([]time.Time{at}, time.Second, 2*time.Second, map[string]string{mac: "server"})
	if !strings.Contains(who, " from server: 198.51.100.11.8081 > 198.51.100.100.") || strings.Count(who, "; ") != 0 {
		t.Errorf("Who = %q, want the one reset from server", who)
	}
	// Only the packets of the hosts asked about, when some are.
	if who := r.Who([]time.Time{at}, time.Second, 2*time.Second, nil, "198.51.100.1", "2001:db8::11"); who != "nothing" {
		t.Errorf("Who of other hosts = %q, want nothing", who)
	}
	if who := r.Who([]time.Time{at}, time.Second, 2*time.Second, nil, "198.51.100.11"); !strings.Contains(who, "198.51.100.11.8081 > ") {
		t.Errorf("Who of 198.51.100.11 = %q, want its reset", who)
	}
	if who := r.Who([]time.Time{at.Add(-time.Hour)}, time.Second, time.Second, nil); who != "nothing" {
		t.Errorf("Who an hour before = %q, want nothing", who)
	}
}
