package bootstrap

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/hostfirewall"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestFirewallPackets: the bootstrap host is asked to receive each
// control-plane node's VRRP adverts (to its own address in unicast, to
// VRRP's group in multicast) and each node's connections to the VIP's
// API and api-int ports, as haproxy's ports after the redirect.
func TestFirewallPackets(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{v1alpha1.ModeUnicast, v1alpha1.ModeMulticast} {
		c, err := v1alpha1.Load(fixture.Repo("examples/day1-bootstrap.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.VRRP.Mode = mode
		h := &machine{c: c, model: cluster.Compile(c), state: cluster.State{Bootstrap: &cluster.BootstrapHost{Interface: "ens3"}}}
		for i := range 2 {
			h.masters = append(h.masters, cluster.Node{Name: fmt.Sprintf("master-%d", i), ControlPlane: true,
				Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", 11+i))}})
		}
		var got []string
		for _, p := range h.firewallPackets() {
			got = append(got, fmt.Sprintf("%s: %d %s>%s:%d>%d %s", p.What, p.Proto, p.Src, p.Dst, p.Port, p.LocalPort, p.Iface))
		}
		dst := "198.51.100.9"
		if mode == v1alpha1.ModeMulticast {
			dst = hostfirewall.MulticastVRRP4.String()
		}
		want := []string{
			"VRRP adverts from master-0: 112 198.51.100.11>" + dst + ":0>0 ens3",
			"VRRP adverts from master-1: 112 198.51.100.12>" + dst + ":0>0 ens3",
			"connections to port 6443 of the VIP from master-0: 6 198.51.100.11>198.51.100.5:6443>9445 ens3",
			"connections to port 6443 of the VIP from master-1: 6 198.51.100.12>198.51.100.5:6443>9445 ens3",
			"connections to port 22623 of the VIP from master-0: 6 198.51.100.11>198.51.100.5:22623>22625 ens3",
			"connections to port 22623 of the VIP from master-1: 6 198.51.100.12>198.51.100.5:22623>22625 ens3",
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n%q\nwant\n%q", mode, got, want)
		}
	}
}

// TestFirewallPacketsBFD: with a routed API VIP the bootstrap host is also
// asked to receive the BFD packets of each router it peers with and has
// bfd on: single-hop BFD's port 3784 from a directly connected router,
// multihop's 4784 from an eBGP multihop one and from an iBGP one outside
// the machine networks; nothing from a router without bfd or one whose
// nodeSelector the host's labels do not match.
func TestFirewallPacketsBFD(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(fixture.Repo("examples/day1-bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.API.Routed = true
	c.Spec.BGP = &v1alpha1.BGPSpec{ASN: 64512, Peers: []v1alpha1.BGPPeer{
		{Address: "198.51.100.1", ASN: 64500, BFD: true},
		{Address: "203.0.113.1", ASN: 64500, BFD: true, EBGPMultihop: 2},
		{Address: "203.0.113.2", ASN: 64512, BFD: true},
		{Address: "198.51.100.2", ASN: 64500},
		{Address: "198.51.100.3", ASN: 64500, BFD: true, NodeSelector: map[string]string{"rack": "b"}},
	}}
	h := &machine{c: c, model: cluster.Compile(c), state: cluster.State{Bootstrap: &cluster.BootstrapHost{Interface: "ens3"}}}
	var got []string
	for _, p := range h.bfdPackets() {
		got = append(got, fmt.Sprintf("%s: %d %s>%s:%d %s", p.What, p.Proto, p.Src, p.Dst, p.Port, p.Iface))
	}
	want := []string{
		"BFD packets from router 198.51.100.1: 17 198.51.100.1>198.51.100.9:3784 ens3",
		"BFD packets from router 203.0.113.1: 17 203.0.113.1>198.51.100.9:4784 ens3",
		"BFD packets from router 203.0.113.2: 17 203.0.113.2>198.51.100.9:4784 ens3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("BFD packets:\n%q\nwant\n%q", got, want)
	}
	c.Spec.API.Routed = false
	if p := h.bfdPackets(); len(p) > 0 {
		t.Errorf("BFD packets without a routed API VIP: %v", p)
	}
}
