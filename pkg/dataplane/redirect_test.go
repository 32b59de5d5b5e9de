package dataplane

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vipctl/vipctl/test/netlab"
)

// TestRedirectsAPIPort: in a node namespace holding the API VIP,
// connections to VIP:6443 from another host and from the node itself reach
// haproxy's port (9445), not the local apiserver's 6443; replacing the
// table is idempotent and nil removes it.
func TestRedirectsAPIPort(t *testing.T) {
	lab := netlab.New(t)
	node := lab.AddHost("node", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	client := lab.AddHost("client", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	node.MustExec("ip", "addr", "add", "198.51.100.5/32", "dev", "br-ex")
	node.MustExec("ip", "addr", "add", "2001:db8:100::5/128", "dev", "br-ex", "nodad")
	serve := func(port, body string) {
		var l net.Listener
		if err := node.Do(func() (err error) { l, err = net.Listen("tcp", ":"+port); return err }); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	serve("6443", "apiserver")
	serve("9445", "haproxy")
	get := func(h *netlab.Host, url string) string {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: h.DialContext, DisableKeepAlives: true}}
		resp, err := c.Get(url)
		if err != nil {
			return "error: " + err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ns, err := netns.GetFromName(node.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Close() }()
	redirects := []PortRedirect{
		{VIP: netip.MustParseAddr("198.51.100.5"), From: 6443, To: 9445},
		{VIP: netip.MustParseAddr("2001:db8:100::5"), From: 6443, To: 9445},
	}
	urls := []string{"http://198.51.100.5:6443/", "http://[2001:db8:100::5]:6443/"}
	check := func(want string) {
		t.Helper()
		for _, u := range urls {
			for _, h := range []*netlab.Host{client, node} {
				if got := get(h, u); got != want {
					t.Errorf("%s from %s: %q, want %q", u, h.Name, got, want)
				}
			}
		}
		// The node's own address is never redirected.
		if got := get(client, "http://198.51.100.11:6443/"); got != "apiserver" {
			t.Errorf("node address: %q, want the apiserver", got)
		}
	}
	check("apiserver")
	for range 2 { // twice: replacing the table must be idempotent
		if err := EnsureRedirects(int(ns), redirects); err != nil {
			t.Fatal(err)
		}
		check("haproxy")
	}
	if err := EnsureRedirects(int(ns), nil); err != nil {
		t.Fatal(err)
	}
	check("apiserver")
}

// TestLocalInterface: the interface is found by the address it holds,
// whatever it is called.
func TestLocalInterface(t *testing.T) {
	lab := netlab.New(t)
	node := lab.AddHost("node", netlab.HostOpts{Iface: "ens3", Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	ns, err := netns.GetFromName(node.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []string{"198.51.100.0/24", "2001:db8:100::/64"} {
		if got, err := LocalInterface(h, netip.MustParsePrefix(n)); err != nil || got != "ens3" {
			t.Errorf("%s: %q, %v; want ens3", n, got, err)
		}
	}
	if _, err := LocalInterface(h, netip.MustParsePrefix("203.0.113.0/24")); err == nil {
		t.Errorf("an interface found for a network the node is not in")
	}
}
