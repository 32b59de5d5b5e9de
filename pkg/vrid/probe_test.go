package vrid

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// frame builds an Ethernet frame around an IP packet carrying payload.
func frame(t *testing.T, src, dst string, vrrp []byte) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	eth := make([]byte, 14)
	if s.Is4() {
		binary.BigEndian.PutUint16(eth[12:], etherTypeIPv4)
		ip := make([]byte, 20)
		ip[0] = 0x45
		ip[8] = 255
		ip[9] = protoVRRP
		copy(ip[12:16], s.AsSlice())
		copy(ip[16:20], d.AsSlice())
		return append(append(eth, ip...), vrrp...)
	}
	binary.BigEndian.PutUint16(eth[12:], etherTypeIPv6)
	ip := make([]byte, 40)
	ip[0] = 0x60
	ip[6] = protoVRRP
	ip[7] = 255
	copy(ip[8:24], s.AsSlice())
	copy(ip[24:40], d.AsSlice())
	return append(append(eth, ip...), vrrp...)
}

func TestParseFrame(t *testing.T) {
	t.Parallel()
	v2 := []byte{0x21, 78, 150, 1, 0, 1, 0, 0, 198, 51, 100, 50}
	v3 := []byte{0x31, 77, 200, 1, 0x00, 0x0a, 0, 0, 198, 51, 100, 50}
	v3six := append([]byte{0x31, 79, 100, 1, 0x00, 0x64, 0, 0}, netip.MustParseAddr("2001:db8::50").AsSlice()...)
	cases := []struct {
		name string
		in   []byte
		want Observation
		ok   bool
	}{
		{"v2 multicast", frame(t, "198.51.100.11", "224.0.0.18", v2), Observation{ID: 78, Version: 2, Family: "ipv4", Source: netip.MustParseAddr("198.51.100.11"), Destination: netip.MustParseAddr("224.0.0.18"), Priority: 150, AdvertCentis: 100}, true},
		{"v3 unicast", frame(t, "198.51.100.11", "198.51.100.12", v3), Observation{ID: 77, Version: 3, Family: "ipv4", Source: netip.MustParseAddr("198.51.100.11"), Destination: netip.MustParseAddr("198.51.100.12"), Priority: 200, AdvertCentis: 10}, true},
		{"v3 IPv6", frame(t, "fe80::1", "ff02::12", v3six), Observation{ID: 79, Version: 3, Family: "ipv6", Source: netip.MustParseAddr("fe80::1"), Destination: netip.MustParseAddr("ff02::12"), Priority: 100, AdvertCentis: 100}, true},
		{"truncated VRRP", frame(t, "198.51.100.11", "224.0.0.18", v2[:5]), Observation{}, false},
		{"truncated IP", frame(t, "198.51.100.11", "224.0.0.18", v2)[:20], Observation{}, false},
		{"not VRRP", func() []byte { f := frame(t, "198.51.100.11", "224.0.0.18", v2); f[14+9] = 6; return f }(), Observation{}, false},
		{"VRID 0", frame(t, "198.51.100.11", "224.0.0.18", []byte{0x21, 0, 150, 1, 0, 1, 0, 0}), Observation{}, false},
		{"not an advertisement", frame(t, "198.51.100.11", "224.0.0.18", []byte{0x22, 5, 150, 1, 0, 1, 0, 0}), Observation{}, false},
		{"empty", nil, Observation{}, false},
	}
	for _, tc := range cases {
		got, ok := ParseFrame(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
