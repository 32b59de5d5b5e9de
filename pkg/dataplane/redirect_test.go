package dataplane

import (
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestRedirectsAPIPort: in a node namespace holding the API VIP,
// connections to VIP:6443 from another host and from the node itself reach
// haproxy's port (9445), not the local apiserver's 6443; replacing the
// table is idempotent and nil removes it.
func TestRedirectsAPIPort(t *testing.T) {
	_, node, client := nodeAndClient(t)
	node.ServeText(t, ":6443", "apiserver")
	node.ServeText(t, ":9445", "haproxy")
	ns := netnsOf(t, node)
	redirects := []onnode.PortRedirect{
		{VIP: netip.MustParseAddr("198.51.100.5"), From: 6443, To: 9445},
		{VIP: netip.MustParseAddr("2001:db8:100::5"), From: 6443, To: 9445},
	}
	urls := []string{"http://198.51.100.5:6443/", "http://[2001:db8:100::5]:6443/"}
	check := func(want string) {
		t.Helper()
		for _, u := range urls {
			for _, h := range []*netlab.Host{client, node} {
				if got := h.Get(u); got != want {
					t.Errorf("%s from %s: %q, want %q", u, h.Name, got, want)
				}
			}
		}
		// The node's own address is never redirected.
		if got := client.Get("http://198.51.100.11:6443/"); got != "apiserver" {
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

// nodeAndClient is a lab with a node (br-ex at 198.51.100.11 and
// 2001:db8:100::11) holding the API VIPs 198.51.100.5 and
// 2001:db8:100::5, and a client on its segment (.100 and ::100).
func nodeAndClient(t *testing.T) (lab *netlab.Lab, node, client *netlab.Host) {
	t.Helper()
	lab = netlab.New(t)
	node = lab.AddHost("node", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	client = lab.AddHost("client", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	node.MustExec("ip", "addr", "add", "198.51.100.5/32", "dev", "br-ex")
	node.MustExec("ip", "addr", "add", "2001:db8:100::5/128", "dev", "br-ex", "nodad")
	return lab, node, client
}

// netnsOf opens h's network namespace for the nftables calls, closed when
// the test ends.
func netnsOf(t *testing.T, h *netlab.Host) netns.NsHandle {
	t.Helper()
	ns, err := netns.GetFromName(h.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}
