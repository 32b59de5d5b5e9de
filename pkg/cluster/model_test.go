package cluster

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

func TestPoolInstanceIsStable(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr("198.51.100.130")
	for n := 1; n <= 16; n++ {
		p := &Pool{ServicePool: &v1alpha1.ServicePool{Name: "p", Instances: n}}
		k := p.Instance(a)
		if k < 0 || k >= n || k != p.Instance(a) {
			t.Fatalf("Instance(%s) of %d = %d", a, n, k)
		}
		if want := v1alpha1.PoolKey("p", k); p.Key(a) != want {
			t.Errorf("Key = %s, want %s", p.Key(a), want)
		}
	}
}

// TestModelLookups: the first pool in declaration order that contains an
// address owns it; anchors are inside but flagged; every VIP gets the key
// of the instance that carries it.
func TestModelLookups(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "compact-ipv4.yaml")
	m := Compile(c)
	general := m.Pool("general")
	if general == nil {
		t.Fatal("no pool general in the example")
	}
	in := netip.MustParseAddr("198.51.100.130")
	if p := m.PoolOf(in); p != general {
		t.Errorf("PoolOf(%s) = %v, want general", in, p)
	}
	if p := m.PoolOf(netip.MustParseAddr("203.0.113.7")); p != nil {
		t.Errorf("PoolOf(outside) = %s, want nil", p.Name)
	}
	if p := m.PoolOf(netip.MustParseAddr("::ffff:198.51.100.130")); p != general {
		t.Errorf("an IPv4-mapped address is the same address: got %v", p)
	}
	anchors := general.Anchors(true)
	if len(anchors) == 0 || !general.IsAnchor(anchors[0]) || general.IsAnchor(in) {
		t.Errorf("anchors %v: IsAnchor wrong", anchors)
	}
	keys := m.VIPKeys(State{
		ServiceVIPs:   map[string][]netip.Addr{"general": {in}},
		LocalServices: []LocalService{{Name: "ns/web", Pool: "general", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.131")}}},
	})
	want := map[string]v1alpha1.InstanceKey{
		c.Spec.API.VIPs[0]:        "api",
		c.Spec.Ingress[0].VIPs[0]: "ingress",
		"198.51.100.130":          general.Key(in),
		"198.51.100.131":          "service/ns/web",
	}
	for a, k := range want {
		if got := keys[netip.MustParseAddr(a)]; got != k {
			t.Errorf("VIPKeys[%s] = %q, want %q", a, got, k)
		}
	}
	if _, _, ok := general.Key(in).Pool(); !ok {
		t.Errorf("%s does not parse back as a pool key", general.Key(in))
	}
}

// TestCompileParsesTheFixedVIPs: the config's own addresses are parsed
// once, in the config's order, for every consumer (render, status).
func TestCompileParsesTheFixedVIPs(t *testing.T) {
	t.Parallel()
	m := Compile(fixture.Example(t, "api-int.yaml"))
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	want := addrs("198.51.100.5", "2001:db8:100::5", "198.51.100.4", "2001:db8:100::4", "198.51.100.6", "2001:db8:100::6")
	if got := m.FixedVIPs(); !slices.Equal(got, want) {
		t.Errorf("FixedVIPs = %v, want %v", got, want)
	}
	if len(m.Ingress) != 1 || m.Ingress[0].Name != "default" || !slices.Equal(m.Ingress[0].VIPs, want[4:]) {
		t.Errorf("Ingress = %+v", m.Ingress)
	}
	nets := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:100::/64")}
	if !slices.Equal(m.MachineNetworks, nets) {
		t.Errorf("MachineNetworks = %v, want %v", m.MachineNetworks, nets)
	}
	if m.Bootstrap != nil {
		t.Errorf("Bootstrap = %v without spec.bootstrap, want none", m.Bootstrap)
	}
	keys := m.VIPKeys(State{})
	for a, k := range map[netip.Addr]v1alpha1.InstanceKey{want[0]: v1alpha1.KeyAPI, want[3]: v1alpha1.KeyAPIInternal, want[5]: v1alpha1.IngressKey("default")} {
		if keys[a] != k {
			t.Errorf("VIPKeys[%s] = %v, want %v", a, keys[a], k)
		}
	}
}

func TestCompileParsesTheBootstrapAddresses(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "day1-bootstrap.yaml")
	m := Compile(c)
	if len(m.Bootstrap) != len(c.Spec.Bootstrap.Addresses) || len(m.Bootstrap) == 0 {
		t.Fatalf("Bootstrap = %v, want spec.bootstrap.addresses %v parsed", m.Bootstrap, c.Spec.Bootstrap.Addresses)
	}
	for i, a := range m.Bootstrap {
		if a != netip.MustParseAddr(c.Spec.Bootstrap.Addresses[i]) {
			t.Errorf("Bootstrap[%d] = %s, want %s", i, a, c.Spec.Bootstrap.Addresses[i])
		}
	}
}

// TestCompileParsesTheBGPPeers: each of spec.bgp.peers once, in order,
// an address parsed and named as frr.conf writes it, an unnumbered peer
// by its interface with no address.
func TestCompileParsesTheBGPPeers(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "bgp-two-racks.yaml")
	c.Spec.BGP.Peers = append(c.Spec.BGP.Peers, v1alpha1.BGPPeer{Address: "2001:DB8:0::1", ASN: 64512},
		v1alpha1.BGPPeer{Interface: "eno2", ASN: 64514})
	m := Compile(c)
	var got []string
	for _, p := range m.BGPPeers {
		got = append(got, p.Name())
	}
	if want := []string{"198.51.100.1", "203.0.113.1", "2001:db8::1", "eno2"}; !slices.Equal(got, want) {
		t.Errorf("the compiled peers' names are %v, want %v", got, want)
	}
	if p := m.BGPPeers[3]; p.Addr.IsValid() || !p.Unnumbered() || p.ASN != 64514 {
		t.Errorf("the unnumbered peer compiled as %+v", p)
	}
	if m := Compile(fixture.Example(t, "compact-ipv4.yaml")); m.BGPPeers != nil {
		t.Errorf("a config without spec.bgp has peers %v", m.BGPPeers)
	}
}
