package hostfirewall

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixtures in testdata/ are `nft -j list ruleset` as captured from a
// network namespace (nftables 1.0.6) by hack/capture-rulesets.sh, which
// makes them again:
//
//   - firewalld-*.json: Debian's firewalld 1.3.3 running in the namespace
//     (its own D-Bus), interface ens3 198.51.100.9/24. public: the
//     defaults (ens3 in no zone, so in the default zone public);
//     public-vrrp: `firewall-cmd --add-protocol=vrrp`; drop-zone:
//     `--zone=drop --change-interface=ens3`; drop-zone-vrrp: and
//     `--zone=drop --add-protocol=vrrp`; trusted: ens3 in zone trusted;
//     rich-vrrp: ens3 back in public and `--add-rich-rule="rule
//     family=ipv4 source address=198.51.100.0/24 protocol value=vrrp
//     accept"`.
//   - nftables-*.json, loaded from testdata/src/*.nft: policy-drop, an
//     nftables.conf of a hardened host (policy drop; established, lo,
//     ICMP, SSH from an admin set, 80 and 443); policy-drop-open: the same
//     plus `ct status dnat accept` and VRRP from 198.51.100.0/24;
//     api-ports-open: policy drop with VRRP and TCP 22, 6443 and 22623
//     open.
//   - iptables-nft-policy-drop.json: `iptables-nft -P INPUT DROP`, lo,
//     `-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT` (an xtables
//     match nft cannot express), TCP 22.

func load(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// bootstrapPackets are what `vipctl bootstrap` on 198.51.100.9 (ens3)
// receives from master-0: its VRRP adverts, and connections to the API
// VIP's 6443 and 22623, which vipctl's redirect turns to haproxy's 9445
// and 22625.
func bootstrapPackets(src string) []Packet {
	s, boot, vip := netip.MustParseAddr(src), netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("198.51.100.5")
	return []Packet{
		{What: "VRRP adverts from master-0", Src: s, Dst: boot, Proto: ProtoVRRP, Iface: "ens3"},
		{What: "the API from master-0", Src: s, Dst: vip, Proto: ProtoTCP, Port: 6443, LocalPort: 9445, Iface: "ens3"},
		{What: "api-int from master-0", Src: s, Dst: vip, Proto: ProtoTCP, Port: 22623, LocalPort: 22625, Iface: "ens3"},
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	const (
		a = Accepted
		d = Dropped
		u = Unsure
	)
	for _, tc := range []struct {
		name, fixture, src string
		want               []Verdict // VRRP, 6443, 22623
		by                 string    // the VRRP finding's
		zone               string
		fix                []string
	}{
		{
			// firewalld's filter_INPUT accepts `ct status dnat` before
			// any zone: the redirected API ports pass, VRRP is rejected.
			name: "firewalld defaults", fixture: "firewalld-public.json", src: "198.51.100.11",
			want: []Verdict{d, a, a},
			by:   "rule 72 of chain inet firewalld filter_IN_public (reject)", zone: "public",
			fix: []string{"firewall-cmd --permanent --zone=public --add-protocol=vrrp", "firewall-cmd --reload"},
		},
		{name: "firewalld vrrp added", fixture: "firewalld-public-vrrp.json", src: "198.51.100.11", want: []Verdict{a, a, a}},
		{
			name: "firewalld drop zone", fixture: "firewalld-drop-zone.json", src: "198.51.100.11",
			want: []Verdict{d, a, a},
			by:   "rule 189 of chain inet firewalld filter_IN_drop (drop)", zone: "drop",
			fix: []string{"firewall-cmd --permanent --zone=drop --add-protocol=vrrp", "firewall-cmd --reload"},
		},
		{name: "firewalld drop zone with vrrp", fixture: "firewalld-drop-zone-vrrp.json", src: "198.51.100.11", want: []Verdict{a, a, a}},
		{name: "firewalld trusted zone", fixture: "firewalld-trusted.json", src: "198.51.100.11", want: []Verdict{a, a, a}},
		{name: "firewalld rich rule, source inside", fixture: "firewalld-rich-vrrp.json", src: "198.51.100.11", want: []Verdict{a, a, a}},
		{
			name: "firewalld rich rule, source outside", fixture: "firewalld-rich-vrrp.json", src: "203.0.113.11",
			want: []Verdict{d, a, a},
			by:   "rule 72 of chain inet firewalld filter_IN_public (reject)", zone: "public",
			fix: []string{"firewall-cmd --permanent --zone=public --add-protocol=vrrp", "firewall-cmd --reload"},
		},
		{
			name: "nftables policy drop", fixture: "nftables-policy-drop.json", src: "198.51.100.11",
			want: []Verdict{d, d, d},
			by:   "the policy drop of chain inet filter input",
			fix: []string{
				"nft insert rule inet filter input ip saddr 198.51.100.11 meta l4proto vrrp accept",
				"nft insert rule inet filter input tcp dport 9445 accept",
				"nft insert rule inet filter input tcp dport 22625 accept",
			},
		},
		{name: "nftables opened", fixture: "nftables-policy-drop-open.json", src: "198.51.100.11", want: []Verdict{a, a, a}},
		{
			// 6443 and 22623 open do not let the API in: the input chain
			// sees haproxy's ports after vipctl's redirect.
			name: "nftables with the API ports open", fixture: "nftables-api-ports-open.json", src: "198.51.100.11",
			want: []Verdict{a, d, d},
			fix: []string{
				"nft insert rule inet filter input tcp dport 9445 accept",
				"nft insert rule inet filter input tcp dport 22625 accept",
			},
		},
		{
			// The conntrack match is an xtables one: it might accept, so
			// the policy's drop is not certain.
			name: "iptables-nft", fixture: "iptables-nft-policy-drop.json", src: "198.51.100.11",
			want: []Verdict{u, u, u},
			by:   "the policy drop of chain ip filter INPUT",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Check(load(t, tc.fixture), bootstrapPackets(tc.src), "vipctl")
			if err != nil {
				t.Fatal(err)
			}
			var got []Verdict
			for _, f := range r.Findings {
				got = append(got, f.Verdict)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("verdicts %v, want %v: %+v", got, tc.want, r.Findings)
			}
			vrrp := r.Findings[0]
			if tc.by != "" && (vrrp.By != tc.by || vrrp.Zone != tc.zone) {
				t.Errorf("VRRP dropped by %q (zone %q), want %q (zone %q)", vrrp.By, vrrp.Zone, tc.by, tc.zone)
			}
			if fix := r.Fix(); !slices.Equal(fix, tc.fix) {
				t.Errorf("fix:\n%s\nwant:\n%s", strings.Join(fix, "\n"), strings.Join(tc.fix, "\n"))
			}
			if r.Firewalld != strings.HasPrefix(tc.fixture, "firewalld") {
				t.Errorf("Firewalld %v for %s", r.Firewalld, tc.fixture)
			}
		})
	}
}

// TestCheckIPv6AndMulticast: IPv6 VRRP passes firewalld's reverse-path
// filter (a fib expression) and is rejected in the zone like IPv4's; VRRP
// to the multicast group (vrrp.mode multicast) is fixed by the group, not
// the sender.
func TestCheckIPv6AndMulticast(t *testing.T) {
	t.Parallel()
	v6 := Packet{What: "VRRP adverts from master-0", Src: netip.MustParseAddr("2001:db8::11"), Dst: netip.MustParseAddr("2001:db8::9"), Proto: ProtoVRRP, Iface: "ens3"}
	mc := Packet{What: "VRRP adverts from master-0", Src: netip.MustParseAddr("198.51.100.11"), Dst: MulticastVRRP4, Proto: ProtoVRRP, Iface: "ens3"}
	r, err := Check(load(t, "firewalld-public.json"), []Packet{v6}, "")
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Findings[0]; f.Verdict != Dropped || f.Zone != "public" || len(f.Unread) > 0 {
		t.Errorf("IPv6 VRRP through firewalld: %+v, want dropped in zone public with every rule read", f)
	}
	r, err = Check(load(t, "nftables-policy-drop.json"), []Packet{mc}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nft insert rule inet filter input ip daddr 224.0.0.18 meta l4proto vrrp accept"}
	if fix := r.Fix(); !slices.Equal(fix, want) {
		t.Errorf("multicast fix %q, want %q", fix, want)
	}
}

// TestCheckEmptyAndOwnTable: a host without a ruleset accepts everything;
// vipctl's own table is left out (the run replaces it).
func TestCheckEmptyAndOwnTable(t *testing.T) {
	t.Parallel()
	own := `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
{"table": {"family": "inet", "name": "vipctl", "handle": 1}},
{"chain": {"family": "inet", "table": "vipctl", "name": "guard", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}]}`
	for name, data := range map[string]string{"empty": `{"nftables": [{"metainfo": {"version": "1.0.6"}}]}`, "own table": own} {
		r, err := Check([]byte(data), bootstrapPackets("198.51.100.11"), "vipctl")
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Dropped())+len(r.Unsure()) > 0 {
			t.Errorf("%s: %+v, want every packet accepted", name, r.Findings)
		}
	}
}

func TestCheckRefusesGarbage(t *testing.T) {
	t.Parallel()
	if _, err := Check([]byte("table inet filter {"), nil, ""); err == nil || !strings.Contains(err.Error(), "nft -j list ruleset") {
		t.Errorf("got %v, want an error naming the listing", err)
	}
}

func TestProblemsAndDoubts(t *testing.T) {
	t.Parallel()
	r, err := Check(load(t, "firewalld-public.json"), bootstrapPackets("198.51.100.11")[:1], "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"VRRP adverts from master-0 (IP protocol 112 from 198.51.100.11 to 198.51.100.9 on ens3): dropped by rule 72 of chain inet firewalld filter_IN_public (reject) (firewalld zone public)"}
	if got := r.Problems(); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	r, err = Check(load(t, "iptables-nft-policy-drop.json"), bootstrapPackets("198.51.100.11")[1:2], "")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"the API from master-0 (TCP from 198.51.100.11 to 198.51.100.5:6443, redirected to local port 9445, on ens3): could not tell; dropped by the policy drop of chain ip filter INPUT unless one of these rules decides otherwise: rule 3 of chain ip filter INPUT (xt match conntrack, counter, accept)"}
	if got := r.Doubts(); !slices.Equal(got, want) {
		t.Errorf("doubts %q, want %q", got, want)
	}
}

// TestCheckBFD: a router's BFD packets (UDP to 3784, a routed API VIP's
// bootstrap host) are rejected by firewalld's default zone and dropped by
// a policy-drop nftables.conf, and let in by the trusted zone; the fixes
// open UDP, not TCP. A rule for UDP 546 (firewalld's dhcpv6-client) does
// not take them, nor does a TCP rule.
func TestCheckBFD(t *testing.T) {
	t.Parallel()
	bfd := Packet{What: "BFD packets from router 198.51.100.1", Src: netip.MustParseAddr("198.51.100.1"), Dst: netip.MustParseAddr("198.51.100.9"),
		Proto: ProtoUDP, Port: 3784, Iface: "ens3"}
	for _, tc := range []struct {
		fixture string
		want    Verdict
		fix     []string
	}{
		{"firewalld-public.json", Dropped, []string{"firewall-cmd --permanent --zone=public --add-port=3784/udp", "firewall-cmd --reload"}},
		{"firewalld-trusted.json", Accepted, nil},
		{"nftables-policy-drop.json", Dropped, []string{"nft insert rule inet filter input udp dport 3784 accept"}},
		{"nftables-api-ports-open.json", Dropped, []string{"nft insert rule inet filter input udp dport 3784 accept"}},
	} {
		r, err := Check(load(t, tc.fixture), []Packet{bfd}, "vipctl")
		if err != nil {
			t.Fatal(err)
		}
		if f := r.Findings[0]; f.Verdict != tc.want || len(f.Unread) > 0 {
			t.Errorf("%s: %+v, want %s with every rule read", tc.fixture, f, tc.want)
		}
		if fix := r.Fix(); !slices.Equal(fix, tc.fix) {
			t.Errorf("%s: fix %q, want %q", tc.fixture, fix, tc.fix)
		}
	}
	r, err := Check(load(t, "nftables-policy-drop.json"), []Packet{bfd}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"BFD packets from router 198.51.100.1 (UDP from 198.51.100.1 to 198.51.100.9:3784 on ens3): dropped by the policy drop of chain inet filter input"}
	if got := r.Problems(); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}
