package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/hostfirewall"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// rulesetFixture is a captured `nft -j list ruleset` (pkg/hostfirewall's
// testdata says how each was made).
func rulesetFixture(name string) string {
	return fixture.Repo(filepath.Join("pkg/hostfirewall/testdata", name))
}

// counterProbe counts, in an input chain after every other (priority
// 200), the packets that got through: VRRP, TCP to haproxy's ports after
// vipctl's redirect, and BFD's UDP. It has no verdict, so the check reads
// it as accepting.
const counterProbe = `table inet probe {
	counter vrrp {}
	counter api {}
	counter apiint {}
	counter bfd {}
	chain input {
		type filter hook input priority 200; policy accept;
		meta l4proto vrrp counter name "vrrp"
		tcp dport 9445 counter name "api"
		tcp dport 22625 counter name "apiint"
		udp dport 3784 counter name "bfd"
	}
}
`

// TestHostFirewallCheckMatchesKernel has the kernel judge the check: for
// each captured ruleset (firewalld's own, and nftables.conf-style ones),
// loaded into a bootstrap host's namespace with vipctl's API redirect
// (dataplane.EnsureRedirects) and the VIP on it, master-0 sends a VRRP
// advert, opens connections to VIP:6443 and VIP:22623 and sends a BFD
// packet (UDP to 3784, a routed API VIP's router); a counter after
// every other chain sees which arrive. hostfirewall.Check, given the same
// ruleset as hostfirewall.Read lists it there, must say exactly those are
// accepted and the others dropped.
func TestHostFirewallCheckMatchesKernel(t *testing.T) {
	l := netlab.New(t)
	boot := l.AddHost("bootstrap", netlab.HostOpts{Iface: "ens3", Addrs: []string{bootstrapAddr + "/24", apiVIP + "/32"}})
	master := l.AddHost("master-0", netlab.HostOpts{Iface: "ens3", Addrs: []string{"198.51.100.11/24"}})
	c, err := v1alpha1.Parse([]byte(bootstrapClusterYAML("fast")))
	if err != nil {
		t.Fatal(err)
	}
	redirects := render.APIRedirects(cluster.Compile(c))
	src, dst, vip := netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr(bootstrapAddr), netip.MustParseAddr(apiVIP)
	packets := []hostfirewall.Packet{
		{What: "VRRP", Src: src, Dst: dst, Proto: hostfirewall.ProtoVRRP, Iface: "ens3"},
		{What: "api", Src: src, Dst: vip, Proto: hostfirewall.ProtoTCP, Port: 6443, LocalPort: 9445, Iface: "ens3"},
		{What: "api-int", Src: src, Dst: vip, Proto: hostfirewall.ProtoTCP, Port: 22623, LocalPort: 22625, Iface: "ens3"},
		{What: "bfd", Src: src, Dst: dst, Proto: hostfirewall.ProtoUDP, Port: 3784, Iface: "ens3"},
	}
	counters := []string{"vrrp", "api", "apiint", "bfd"}
	for _, name := range []string{
		"firewalld-public.json", "firewalld-public-vrrp.json", "firewalld-drop-zone.json", "firewalld-drop-zone-vrrp.json",
		"firewalld-trusted.json", "firewalld-rich-vrrp.json",
		"nftables-policy-drop.json", "nftables-policy-drop-open.json", "nftables-api-ports-open.json",
	} {
		t.Run(name, func(t *testing.T) {
			boot.MustExec("nft", "flush", "ruleset")
			boot.MustExec("nft", "-j", "-f", rulesetFixture(name))
			probe := filepath.Join(t.TempDir(), "probe.nft")
			writeFile(t, probe, []byte(counterProbe))
			boot.MustExec("nft", "-f", probe)
			if err := boot.Do(func() error { return dataplane.EnsureRedirects(-1, redirects) }); err != nil {
				t.Fatal(err)
			}
			var ruleset []byte
			if err := boot.Do(func() (err error) {
				ruleset, err = hostfirewall.Read(context.Background(), dataplane.RedirectTable)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			report, err := hostfirewall.Check(ruleset, packets, dataplane.RedirectTable)
			if err != nil {
				t.Fatal(err)
			}

			if err := master.Do(func() error { return sendVRRP(dst.String()) }); err != nil {
				t.Fatal(err)
			}
			for _, port := range []int{6443, 22623} {
				_ = master.Do(func() error {
					conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", apiVIP, port), 300*time.Millisecond)
					if err == nil {
						_ = conn.Close()
					}
					return nil
				})
			}
			_ = master.Do(func() error {
				conn, err := net.Dial("udp", net.JoinHostPort(bootstrapAddr, "3784"))
				if err != nil {
					return err
				}
				defer func() { _ = conn.Close() }()
				// A BFD control packet's 24 bytes: version 1, state Down.
				_, err = conn.Write([]byte{0x20, 0x40, 3, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0})
				return err
			})
			for i, f := range report.Findings {
				arrived := counterPackets(t, boot, counters[i]) > 0
				if arrived != (f.Verdict == hostfirewall.Accepted) || f.Verdict == hostfirewall.Unsure {
					t.Errorf("%s: the kernel let it in: %v; the check says %s (%s) %v", f.Packet.What, arrived, f.Verdict, f.By, f.Unread)
				}
			}
		})
	}
}

// sendVRRP sends one VRRPv2 advert (VRID 10, priority 100) to dst from
// the current namespace, as keepalived's unicast does.
func sendVRRP(dst string) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, hostfirewall.ProtoVRRP)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Close(fd) }()
	var to syscall.SockaddrInet4
	copy(to.Addr[:], net.ParseIP(dst).To4())
	advert := []byte{0x21, 10, 100, 1, 0, 1, 0, 0, 198, 51, 100, 5}
	return syscall.Sendto(fd, advert, 0, &to)
}

// counterPackets reads a named counter of table inet probe, waiting
// briefly for the packets sent to be counted.
func counterPackets(t *testing.T, h *netlab.Host, name string) int {
	t.Helper()
	var n int
	for range 10 {
		out := h.MustExec("nft", "-j", "list", "counter", "inet", "probe", name)
		var l struct {
			Nftables []struct {
				Counter *struct{ Packets int } `json:"counter"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("nft list counter %s: %v: %s", name, err, out)
		}
		for _, e := range l.Nftables {
			if e.Counter != nil {
				n = e.Counter.Packets
			}
		}
		if n > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// TestBootstrapRefusesClosedFirewall runs the real `vipctl bootstrap` on a
// host whose firewalld (its captured ruleset, defaults: zone public) drops
// VRRP: it refuses before it creates its directory or starts a daemon,
// naming what is dropped and the firewall-cmd commands that open it. With
// VRRP added to the zone it starts (and stops on SIGTERM).
func TestBootstrapRefusesClosedFirewall(t *testing.T) {
	vipctl := requireVipctl(t)
	l := netlab.New(t)
	boot := l.AddHost("bootstrap", netlab.HostOpts{Iface: "ens3", Addrs: []string{bootstrapAddr + "/24"}})
	dir := t.TempDir()
	cfg, nodes, run := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "run")
	writeFile(t, cfg, []byte(bootstrapClusterYAML("fast")))
	writeFile(t, nodes, nodeListOf(t, masters(3)))
	argv := []string{vipctl, "bootstrap", "-f", cfg, "--nodes", nodes, "--dir", run}

	boot.MustExec("nft", "-j", "-f", rulesetFixture("firewalld-public.json"))
	out, err := boot.Exec(argv...)
	if err == nil {
		t.Fatalf("vipctl bootstrap started with VRRP dropped:\n%s", out)
	}
	for _, want := range []string{
		"the host's firewall drops what the bootstrap host must receive",
		"VRRP adverts from master-0 (IP protocol 112 from 198.51.100.11 to 198.51.100.9 on ens3): dropped by rule",
		"(firewalld zone public)",
		"firewall-cmd --permanent --zone=public --add-protocol=vrrp\n  firewall-cmd --reload\n",
		"--skip-firewall-check",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "connections to port") {
		t.Errorf("the API's connections are named, but firewalld accepts them (ct status dnat):\n%s", out)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("--dir %s exists after the refusal (%v): something started", run, err)
	}

	boot.MustExec("nft", "flush", "ruleset")
	boot.MustExec("nft", "-j", "-f", rulesetFixture("firewalld-public-vrrp.json"))
	proc := boot.Start("vipctl-bootstrap", argv...)
	lab.WaitFor(t, 30*time.Second, "vipctl bootstrap to start keepalived and haproxy", func() bool {
		return strings.Contains(proc.LogTail(20), "keepalived and haproxy started") || proc.Exited()
	})
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(30 * time.Second); err != nil {
		t.Errorf("vipctl bootstrap with VRRP open: %v\n%s", err, proc.LogTail(30))
	}
	if strings.Contains(proc.LogTail(50), "firewall") {
		t.Errorf("vipctl bootstrap warned about the firewall with VRRP open:\n%s", proc.LogTail(50))
	}
}

// TestVRRPRepliesPassFirewalld pins what the check leaves aside: under
// firewalld's defaults a node's unicast VRRP advert to the bootstrap host
// is dropped when the node speaks first, and let in once the bootstrap
// host has sent one to that node, as the reply of the conntrack entry its
// own advert made (protocol 112 is tracked by address pair). So in
// unicast mode a hand-over can work through a closed firewalld by luck of
// timing; the check asks for VRRP to be let in as new packets, which
// holds whoever speaks first (docs/bootstrap.md, "The host's firewall").
func TestVRRPRepliesPassFirewalld(t *testing.T) {
	l := netlab.New(t)
	boot := l.AddHost("bootstrap", netlab.HostOpts{Iface: "ens3", Addrs: []string{bootstrapAddr + "/24"}})
	master := l.AddHost("master-0", netlab.HostOpts{Iface: "ens3", Addrs: []string{"198.51.100.11/24"}})
	boot.MustExec("nft", "-j", "-f", rulesetFixture("firewalld-public.json"))
	probe := filepath.Join(t.TempDir(), "probe.nft")
	writeFile(t, probe, []byte(counterProbe))
	boot.MustExec("nft", "-f", probe)

	if err := master.Do(func() error { return sendVRRP(bootstrapAddr) }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := counterPackets(t, boot, "vrrp"); n != 0 {
		t.Fatalf("the node's first advert got through firewalld's defaults (%d packets)", n)
	}
	if err := boot.Do(func() error { return sendVRRP("198.51.100.11") }); err != nil {
		t.Fatal(err)
	}
	if err := master.Do(func() error { return sendVRRP(bootstrapAddr) }); err != nil {
		t.Fatal(err)
	}
	if n := counterPackets(t, boot, "vrrp"); n != 1 {
		t.Errorf("the node's advert after the bootstrap host's: %d packets through, want 1 (a conntrack reply)", n)
	}
}
