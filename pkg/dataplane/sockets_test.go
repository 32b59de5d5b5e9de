package dataplane

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestLocalVIPsLapseResetsTheNodesOwnConnections: a client on the node
// that reached the VIP while the node held it (its source the VIP itself,
// as kube-proxy's through api-int on a control-plane node) is still
// answered by this node through the grace after a peer took the VIP, and
// is reset when the grace ends, so it reconnects, now to the peer. Without
// the reset it waits on a connection whose packets go to the peer, which
// sends its resets to the VIP, that is to itself: the client's read runs
// into its deadline. A VIP that leaves with no local route (someone
// removed it) has its connections reset at once. A listener on the VIP
// stays.
func TestLocalVIPsLapseResetsTheNodesOwnConnections(t *testing.T) {
	for _, f := range []struct {
		name, vip, plen, a, b string
		noRoute               bool
	}{
		{"IPv4", "198.51.100.5", "/32", "198.51.100.11/24", "198.51.100.12/24", false},
		{"IPv6", "2001:db8:100::5", "/128", "2001:db8:100::11/64", "2001:db8:100::12/64", false},
		{"IPv4 without a local route", "198.51.100.5", "/32", "198.51.100.11/24", "198.51.100.12/24", true},
	} {
		t.Run(f.name, func(t *testing.T) {
			lab := netlab.New(t)
			a := lab.AddHost("a", netlab.HostOpts{Iface: "br-ex", Addrs: []string{f.a}})
			b := lab.AddHost("b", netlab.HostOpts{Iface: "br-ex", Addrs: []string{f.b}})
			serveName(a)
			serveName(b)
			const grace = time.Second
			_, routes := runLocalVIPsOn(t, a, grace, nil, f.vip)
			add := []string{"ip", "addr", "add", f.vip + f.plen, "dev", "br-ex"}
			if strings.Contains(f.vip, ":") {
				add = append(add, "nodad")
			}
			a.MustExec(add...)
			waitFor(t, "the VIP's local route", func() bool { return routes() != "" })
			a.Serve(net.JoinHostPort(f.vip, "8081"), func(c net.Conn) { _ = c.Close() })
			own := dialLine(t, a, f.vip)
			if got := own.c.LocalAddr().(*net.TCPAddr).IP.String(); got != f.vip {
				t.Fatalf("the node's own connection to the VIP comes from %s, want the VIP", got)
			}
			if got, err := own.ask(); got != "a" {
				t.Fatalf("VIP held: %q, %v; want a", got, err)
			}
			if f.noRoute {
				a.MustExec("ip", "route", "del", "local", f.vip, "dev", "lo", "table", "local", "proto", "118")
			}
			// The peer preempts: the VIP leaves a and appears on b.
			a.MustExec("ip", "addr", "del", f.vip+f.plen, "dev", "br-ex")
			b.MustExec(add...)
			if f.noRoute {
				// Nothing keeps the connection: it ends with the sync the
				// address's removal starts.
				waitFor(t, "the connection's end", func() bool {
					return strings.TrimSpace(string(a.MustExec("ss", "-Htn", "state", "established", "src", f.vip))) == ""
				})
			} else {
				if got, err := own.ask(); got != "a" {
					t.Fatalf("in the grace: %q, %v; want a, the connection kept", got, err)
				}
				waitFor(t, "the local route's lapse", func() bool { return routes() == "" })
			}
			_, err := own.ask()
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("after the VIP left the node's own connection got %v, want it reset", err)
			}
			if got, err := dialLine(t, a, f.vip).ask(); got != "b" {
				t.Errorf("a new connection from the node: %q, %v; want b, the VIP's holder", got, err)
			}
			src := f.vip
			if strings.Contains(src, ":") {
				src = "[" + src + "]"
			}
			if out := strings.TrimSpace(string(a.MustExec("ss", "-Htln", "src", src))); out == "" {
				t.Errorf("the listener on %s:8081 is gone, want it kept", f.vip)
			}
		})
	}
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
