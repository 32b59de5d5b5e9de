package linklayer

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

var mac = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}

// TestARPRequest: a question and keepalived's gratuitous ARP, field by
// field (RFC 826): broadcast, from mac, request, sender and target.
func TestARPRequest(t *testing.T) {
	t.Parallel()
	vip, me := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("198.51.100.100")
	for _, tc := range []struct {
		name           string
		sender, target netip.Addr
		targetMAC      net.HardwareAddr
		wantTHA        string
	}{
		{"question", me, vip, nil, "00:00:00:00:00:00"},
		{"gratuitous", vip, vip, Broadcast, "ff:ff:ff:ff:ff:ff"},
	} {
		f := ARPRequest(mac, tc.sender, tc.target, tc.targetMAC)
		switch {
		case len(f) != 42, net.HardwareAddr(f[0:6]).String() != Broadcast.String(), net.HardwareAddr(f[6:12]).String() != mac.String(),
			binary.BigEndian.Uint16(f[12:14]) != 0x0806, binary.BigEndian.Uint16(f[20:22]) != 1,
			net.HardwareAddr(f[22:28]).String() != mac.String(), netip.AddrFrom4([4]byte(f[28:32])) != tc.sender,
			net.HardwareAddr(f[32:38]).String() != tc.wantTHA, netip.AddrFrom4([4]byte(f[38:42])) != tc.target:
			t.Errorf("%s: % x", tc.name, f)
		}
	}
}

// TestNeighbourMessages: the solicitation carries the source link-layer
// option, the advertisement the Override flag and the target one (RFC
// 4861 4.3, 4.4); solicitations go to the solicited-node group.
func TestNeighbourMessages(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr("2001:db8:100::12:3456")
	ns, na := NeighbourSolicitation(mac, a), NeighbourAdvertisement(mac, a)
	for _, tc := range []struct {
		name               string
		b                  []byte
		typ, flags, option byte
	}{{"solicitation", ns, 135, 0, 1}, {"advertisement", na, 136, 0x20, 2}} {
		if len(tc.b) != 32 || tc.b[0] != tc.typ || tc.b[4] != tc.flags || netip.AddrFrom16([16]byte(tc.b[8:24])) != a || tc.b[24] != tc.option || tc.b[25] != 1 || net.HardwareAddr(tc.b[26:32]).String() != mac.String() {
			t.Errorf("%s: % x", tc.name, tc.b)
		}
	}
	if got := SolicitedNode(a); got != netip.MustParseAddr("ff02::1:ff12:3456") {
		t.Errorf("solicited-node group %s", got)
	}
}
