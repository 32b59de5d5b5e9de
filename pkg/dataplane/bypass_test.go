package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestResetBypassingConnections: a node's own connections to the API VIP
// opened before its redirect table existed go to the VIP's holder over
// the network; ResetBypassing resets exactly those (both families), and
// the connection opened after the table, turned to the node's own
// haproxy, keeps answering.
func TestResetBypassingConnections(t *testing.T) {
	lab := netlab.New(t)
	holder := lab.AddHost("holder", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.12/24", "2001:db8:100::12/64"}})
	node := lab.AddHost("node", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	holder.MustExec("ip", "addr", "add", "198.51.100.5/32", "dev", "br-ex")
	holder.MustExec("ip", "addr", "add", "2001:db8:100::5/128", "dev", "br-ex", "nodad")
	serveName(holder) // the holder's "haproxy" on the VIP's port, 8080
	node.Serve(":9445", func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			if _, err := fmt.Fprintln(c, "local haproxy"); err != nil {
				return
			}
		}
	})
	redirects := []onnode.PortRedirect{
		{VIP: netip.MustParseAddr("198.51.100.5"), From: 8080, To: 9445},
		{VIP: netip.MustParseAddr("2001:db8:100::5"), From: 8080, To: 9445},
	}
	before := []*lineConn{dialLine(t, node, "198.51.100.5"), dialLine(t, node, "2001:db8:100::5")}
	for _, c := range before {
		if got, err := c.ask(); got != "holder" {
			t.Fatalf("before the redirect: %q, %v; want the holder", got, err)
		}
	}
	if err := EnsureRedirects(int(netnsOf(t, node)), redirects); err != nil {
		t.Fatal(err)
	}
	after := dialLine(t, node, "198.51.100.5")
	if got, err := after.ask(); got != "local haproxy" {
		t.Fatalf("after the redirect: %q, %v; want the local haproxy", got, err)
	}
	n, err := ResetBypassing(host.Target{Netns: node.NS}, redirects)
	if err != nil || n != 2 {
		t.Fatalf("ResetBypassing: %d reset, %v; want 2", n, err)
	}
	for i, c := range before {
		// SOCK_DESTROY ends the socket with ECONNABORTED.
		if _, err := c.ask(); !errors.Is(err, syscall.ECONNABORTED) {
			t.Errorf("bypassing connection %d after the reset: %v, want it aborted", i, err)
		}
	}
	if got, err := after.ask(); got != "local haproxy" {
		t.Errorf("the redirected connection after the reset: %q, %v; want it still answering", got, err)
	}
	if n, err := ResetBypassing(host.Target{Netns: node.NS}, redirects); err != nil || n != 0 {
		t.Errorf("a second ResetBypassing: %d reset, %v; want none", n, err)
	}
}
