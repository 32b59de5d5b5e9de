package vrid

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestParseAdvertAddresses: the addresses an advert carries, VRRPv2
// (with its authentication data after them) and v3, IPv4 and IPv6; a
// count larger than the packet holds keeps what is there.
func TestParseAdvertAddresses(t *testing.T) {
	t.Parallel()
	six := netip.MustParseAddr("2001:db8:100::50")
	for _, tc := range []struct {
		name     string
		src, dst string
		vrrp     []byte
		want     []netip.Addr
	}{
		{"v2, two addresses", "198.51.100.11", "224.0.0.18", []byte{0x21, 78, 150, 2, 0, 1, 0, 0, 198, 51, 100, 50, 198, 51, 100, 51, 0, 0, 0, 0, 0, 0, 0, 0},
			[]netip.Addr{netip.MustParseAddr("198.51.100.50"), netip.MustParseAddr("198.51.100.51")}},
		{"v3 IPv6", "fe80::1", "ff02::12", append([]byte{0x31, 79, 100, 1, 0x00, 0x64, 0, 0}, six.AsSlice()...), []netip.Addr{six}},
		{"count beyond the packet", "198.51.100.11", "224.0.0.18", []byte{0x31, 77, 100, 3, 0x00, 0x64, 0, 0, 198, 51, 100, 50, 198, 51},
			[]netip.Addr{netip.MustParseAddr("198.51.100.50")}},
	} {
		a, ok := parseAdvert(frame(t, tc.src, tc.dst, tc.vrrp))
		if !ok || !slices.Equal(a.Addresses, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, a.Addresses, ok, tc.want)
		}
	}
}

// TestVRRPFilter runs the tap's BPF program (hearing outgoing packets
// too: x/net/bpf's VM lacks the packet-type extension, which the netns
// test TestTapHearsWhatArrives covers) over frames: VRRP over IPv4 and
// IPv6, 802.1Q-tagged or not, passes whole; other IP protocols, ARP and
// tagged TCP are dropped.
func TestVRRPFilter(t *testing.T) {
	t.Parallel()
	filter, err := vrrpFilter(true)
	if err != nil {
		t.Fatal(err)
	}
	prog := make([]bpf.Instruction, len(filter))
	for i, f := range filter {
		prog[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	v3 := []byte{0x31, 77, 200, 1, 0x00, 0x0a, 0, 0, 198, 51, 100, 50}
	tcp4 := func() []byte {
		f := frame(t, "198.51.100.11", "198.51.100.12", v3)
		f[14+9] = unix.IPPROTO_TCP
		return f
	}()
	tcp6 := func() []byte {
		f := frame(t, "2001:db8:100::11", "2001:db8:100::12", v3)
		f[14+6] = unix.IPPROTO_TCP
		return f
	}()
	tagged := func(f []byte) []byte {
		out := append([]byte{}, f[:12]...)
		out = binary.BigEndian.AppendUint16(out, etherTypeVLAN)
		out = binary.BigEndian.AppendUint16(out, 42)
		return append(out, f[12:]...)
	}
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], unix.ETH_P_ARP)
	for _, tc := range []struct {
		name string
		in   []byte
		pass bool
	}{
		{"VRRP IPv4", frame(t, "198.51.100.11", "224.0.0.18", v3), true},
		{"VRRP IPv6", frame(t, "fe80::1", "ff02::12", v3), true},
		{"VRRP IPv4 tagged", tagged(frame(t, "198.51.100.11", "224.0.0.18", v3)), true},
		{"VRRP IPv6 tagged", tagged(frame(t, "fe80::1", "ff02::12", v3)), true},
		{"TCP IPv4", tcp4, false},
		{"TCP IPv6", tcp6, false},
		{"TCP IPv4 tagged", tagged(tcp4), false},
		{"ARP", arp, false},
	} {
		n, err := vm.Run(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The VM returns the program's verdict unclamped: the kernel keeps
		// min(verdict, length) bytes, 0 drops.
		if pass := n >= len(tc.in); pass != tc.pass || (!pass && n != 0) {
			t.Errorf("%s: the filter keeps %d of %d bytes, want pass %v", tc.name, n, len(tc.in), tc.pass)
		}
	}
	if _, err := vrrpFilter(false); err != nil {
		t.Errorf("the filter without outgoing packets: %v", err)
	}
}

// TestMembersForeign: an advert is foreign when it carries one of the
// cluster's IDs (either family) from an address that is no member of it;
// a link-local IPv6 source (multicast VRRPv3) is the cluster's when it
// advertises the ID's VIPs only.
func TestMembersForeign(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr
	m := Members{}
	m.Add(51, "api", a("198.51.100.11"), []netip.Addr{a("198.51.100.5")})
	m.Add(51, "api", a("198.51.100.12"), []netip.Addr{a("198.51.100.5")})
	m.Add(51, "api", a("2001:db8:100::11"), []netip.Addr{a("2001:db8:100::5")})
	if r := m[51]; !slices.Equal(r.Keys, []string{"api"}) || len(r.Sources) != 3 || len(r.VIPs) != 2 {
		t.Fatalf("members of 51: %+v", r)
	}
	advert := func(id uint8, family, src string, addrs ...string) Advert {
		ad := Advert{Observation: Observation{ID: id, Family: family, Source: a(src)}}
		for _, s := range addrs {
			ad.Addresses = append(ad.Addresses, a(s))
		}
		return ad
	}
	for _, tc := range []struct {
		name    string
		in      Advert
		foreign bool
	}{
		{"a member", advert(51, "ipv4", "198.51.100.12", "198.51.100.5"), false},
		{"a member over IPv6", advert(51, "ipv6", "2001:db8:100::11", "2001:db8:100::5"), false},
		{"another ID", advert(52, "ipv4", "198.51.100.66", "198.51.100.60"), false},
		{"a stranger", advert(51, "ipv4", "198.51.100.66", "198.51.100.60"), true},
		{"a stranger with the cluster's VIP", advert(51, "ipv4", "198.51.100.66", "198.51.100.5"), true},
		{"a stranger over IPv6", advert(51, "ipv6", "2001:db8:100::66", "2001:db8:100::5"), true},
		{"link-local with the ID's VIPs", advert(51, "ipv6", "fe80::11", "2001:db8:100::5"), false},
		{"link-local with other VIPs", advert(51, "ipv6", "fe80::66", "2001:db8:100::5", "2001:db8:100::60"), true},
		{"link-local with no address", advert(51, "ipv6", "fe80::66"), true},
	} {
		if got := m.Foreign(tc.in); got != tc.foreign {
			t.Errorf("%s: foreign %v, want %v", tc.name, got, tc.foreign)
		}
	}
}
