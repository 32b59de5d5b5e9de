package preflight

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/linklayer"
)

var (
	holderMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x20}
	askerMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
)

// arpReply is holderMAC's answer "a is at holderMAC" to askerMAC.
func arpReply(a netip.Addr) []byte {
	f := linklayer.ARPRequest(holderMAC, a, netip.MustParseAddr("198.51.100.100"), nil)
	copy(f[0:6], askerMAC)
	binary.BigEndian.PutUint16(f[20:22], 2)
	return f
}

// neighbourAdvert is holderMAC's advertisement for a, with the target
// link-layer address option naming optMAC (none when nil).
func neighbourAdvert(a netip.Addr, optMAC net.HardwareAddr) []byte {
	f := append(append(append([]byte{}, askerMAC...), holderMAC...), 0x86, 0xdd)
	ip := make([]byte, 40)
	ip[0], ip[6], ip[7] = 0x60, unix.IPPROTO_ICMPV6, 255
	icmp := []byte{136, 0, 0, 0, 0x60, 0, 0, 0}
	t := a.As16()
	icmp = append(icmp, t[:]...)
	if optMAC != nil {
		icmp = append(append(icmp, 2, 1), optMAC...)
	}
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	return append(append(f, ip...), icmp...)
}

// TestParseClaim: an ARP reply or a gratuitous ARP names its sender's
// address and MAC; a neighbour advertisement its target and the MAC of
// its option, else the frame's source; requests for an address, a
// solicitation and anything truncated claim nothing.
func TestParseClaim(t *testing.T) {
	t.Parallel()
	vip4, vip6 := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("2001:db8::5")
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	ns := neighbourAdvert(vip6, nil)
	ns[14+40] = 135
	cases := []struct {
		name string
		f    []byte
		want netip.Addr
		mac  net.HardwareAddr
	}{
		{"ARP reply", arpReply(vip4), vip4, holderMAC},
		{"gratuitous ARP", linklayer.ARPRequest(holderMAC, vip4, vip4, linklayer.Broadcast), vip4, holderMAC},
		{"an ARP probe claims no address", linklayer.ARPRequest(askerMAC, netip.IPv4Unspecified(), vip4, nil), netip.Addr{}, nil},
		{"a request claims only its sender", linklayer.ARPRequest(askerMAC, netip.MustParseAddr("198.51.100.100"), vip4, nil), netip.MustParseAddr("198.51.100.100"), askerMAC},
		{"neighbour advertisement with its option", neighbourAdvert(vip6, other), vip6, other},
		{"neighbour advertisement without one", neighbourAdvert(vip6, nil), vip6, holderMAC},
		{"neighbour solicitation", ns, netip.Addr{}, nil},
		{"truncated ARP", arpReply(vip4)[:30], netip.Addr{}, nil},
		{"truncated advertisement", neighbourAdvert(vip6, nil)[:70], netip.Addr{}, nil},
		{"empty", nil, netip.Addr{}, nil},
	}
	for _, tc := range cases {
		a, mac, ok := parseClaim(tc.f)
		if ok != tc.want.IsValid() || (ok && (a != tc.want || mac.String() != tc.mac.String())) {
			t.Errorf("%s: got %v %v %v, want %v %v", tc.name, a, mac, ok, tc.want, tc.mac)
		}
	}
}

// TestSources: a request for an address goes from this host's own
// address on its subnet, or is an ARP probe from 0.0.0.0 off every one.
func TestSources(t *testing.T) {
	t.Parallel()
	vip := netip.MustParseAddr("198.51.100.5")
	srcs := ipv4Prefixes{netip.MustParsePrefix("203.0.113.7/24"), netip.MustParsePrefix("198.51.100.100/24")}
	if got := srcs.of(vip); got != netip.MustParseAddr("198.51.100.100") {
		t.Errorf("source for %s: %s", vip, got)
	}
	if got := srcs.of(netip.MustParseAddr("192.168.0.5")); !got.IsUnspecified() {
		t.Errorf("source off every subnet: %s, want 0.0.0.0", got)
	}
}

// TestTargets: every API and ingress VIP with its field path; every
// address of a small vrrp pool; a large pool's anchors only, and a bgp
// pool not at all, each said in notAsked.
func TestTargets(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Parse([]byte(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: ostest}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8::/64"]
  api: {vips: [198.51.100.5, "2001:db8::5"]}
  ingress: [{name: default, vips: [198.51.100.6]}]
  servicePools:
    - {name: small, addresses: [198.51.100.200-198.51.100.203]}
    - {name: big, addresses: ["2001:db8::1:0/112"]}
    - {name: routed, mode: bgp, addresses: [203.0.113.0/28]}
  bgp: {asn: 64513, peers: [{address: 198.51.100.1, asn: 64512}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	targets, notAsked := Targets(c)
	var got []string
	for _, tg := range targets {
		got = append(got, tg.Addr.String()+" "+tg.Field)
	}
	want := []string{
		"198.51.100.5 spec.api.vips[0]",
		"2001:db8::5 spec.api.vips[1]",
		"198.51.100.6 spec.ingress[0].vips[0]",
		"198.51.100.200 spec.servicePools[0] (small)",
		"198.51.100.201 spec.servicePools[0] (small)",
		"198.51.100.202 spec.servicePools[0] (small)",
		"198.51.100.203 spec.servicePools[0] (small)",
		"2001:db8::1:ffff spec.servicePools[1] (big) anchor",
		"2001:db8::1:fffe spec.servicePools[1] (big) anchor",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantNot := []string{
		"spec.servicePools[1] (big): 65536 addresses, more than 1024: only its 2 VRRP anchors were asked for",
		"spec.servicePools[2] (routed): mode bgp, routed to the nodes rather than held on the segment",
	}
	if strings.Join(notAsked, "\n") != strings.Join(wantNot, "\n") {
		t.Errorf("not asked:\n%s\nwant:\n%s", strings.Join(notAsked, "\n"), strings.Join(wantNot, "\n"))
	}
	// A routed API VIP is announced to the routers, not held on the
	// segment: not asked, and said so.
	c.Spec.API.Routed = true
	targets, notAsked = Targets(c)
	if slices.ContainsFunc(targets, func(tg Target) bool { return strings.HasPrefix(tg.Field, "spec.api.") }) || len(notAsked) != 3 ||
		!strings.Contains(notAsked[0], "spec.api.routed") {
		t.Errorf("routed API: targets %v, not asked %v", targets, notAsked)
	}
}

// TestReportProblems: each held address is one finding naming its field
// and who answered; this host holding one says so.
func TestReportProblems(t *testing.T) {
	t.Parallel()
	r := Report{Interface: "br-ex", Asked: 3, Held: []Result{
		{Address: "198.51.100.5", Field: "spec.api.vips[0]", AnsweredBy: []string{"02:00:00:00:00:20"}},
		{Address: "198.51.100.6", Field: "spec.ingress[0].vips[0]", Local: true},
	}}
	want := []string{
		"198.51.100.5 (spec.api.vips[0]) is answered by 02:00:00:00:00:20",
		"198.51.100.6 (spec.ingress[0].vips[0]) is held by this host",
	}
	if got := r.Problems(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems %q", got)
	}
	if !strings.Contains(r.Text(), "HELD: 198.51.100.5 (spec.api.vips[0]) is answered by 02:00:00:00:00:20") {
		t.Errorf("text:\n%s", r.Text())
	}
}
