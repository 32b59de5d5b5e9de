package sidecar

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// TestStrangers: an answer is a stranger's unless a member has its
// link-layer address or it is keepalived's virtual MAC; while a peer of
// the VIP's instance is silent nobody is called a stranger, while a peer
// of another instance is, the VIP's instance still tells.
func TestStrangers(t *testing.T) {
	m := memberMACs{byMAC: map[string]string{"02:00:00:00:00:01": "master-0 (this node)", "02:00:00:00:00:02": "198.51.100.12"}}
	heard := []net.HardwareAddr{mac("02:00:00:00:00:02"), mac("02:00:00:00:00:66"), mac("00:00:5e:00:01:33"), mac("00:00:5e:00:02:33")}
	peers := []netip.Addr{netip.MustParseAddr("198.51.100.12"), netip.MustParseAddr("198.51.100.13")}
	got := m.strangers(heard, peers)
	if len(got) != 1 || got[0].String() != "02:00:00:00:00:66" {
		t.Errorf("strangers %v, want only 02:00:00:00:00:66", got)
	}
	m.silent = []netip.Addr{netip.MustParseAddr("198.51.100.14")}
	if got := m.strangers(heard, peers); len(got) != 1 {
		t.Errorf("strangers %v with another instance's peer silent, want the stranger", got)
	}
	m.silent = append(m.silent, netip.MustParseAddr("198.51.100.13"))
	if got := m.strangers(heard, peers); len(got) != 0 {
		t.Errorf("strangers %v with a peer of the VIP's instance silent, want none", got)
	}
}

// TestAnswerCollector: a series per asked address, none for an address
// no longer asked (even set by a pass that began before), and none for a
// zero count where zeros are left out.
func TestAnswerCollector(t *testing.T) {
	a, b, c := netip.MustParseAddr("198.51.100.5"), netip.MustParseAddr("198.51.100.6"), netip.MustParseAddr("198.51.100.7")
	all := newAnswerCollector("answers", "help", false)
	some := newAnswerCollector("strangers", "help", true)
	for _, col := range []*AnswerCollector{all, some} {
		col.keep([]netip.Addr{a, b})
		col.set(a, 1)
		col.set(b, 0)
		col.set(c, 2) // not asked for
	}
	if n := testutil.CollectAndCount(all); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
	if n := testutil.CollectAndCount(some); n != 1 {
		t.Errorf("%d series leaving out zeros, want 1", n)
	}
	all.keep([]netip.Addr{b})
	if _, ok := all.Get(a); ok || testutil.CollectAndCount(all) != 1 {
		t.Errorf("%s kept after it was no longer asked for", a)
	}
	if got := sortedSet([]netip.Addr{c, a, c, b}); !slices.Equal(got, []netip.Addr{a, b, c}) {
		t.Errorf("sortedSet: %v", got)
	}
}
