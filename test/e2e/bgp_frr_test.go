package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestBGPFRRSupervisor: `vipctl frr`, the frr container's main process,
// in a namespace of its own with a node's layout under a root directory.
// bgpd comes up with the frr.conf on disk and answers on its vty socket;
// when bgpd dies the others are stopped and vipctl frr exits non-zero (the
// kubelet restarts the container); on SIGTERM to vipctl frr alone, as the
// kubelet sends it, every daemon stops and it exits 0. No daemon outlives
// it either way.
func TestBGPFRRSupervisor(t *testing.T) {
	lab.RequireFRR(t)
	bin, err := buildVipctl()
	if err != nil {
		t.Fatal(err)
	}
	h := netlab.New(t).AddHost("n0", netlab.HostOpts{Addrs: []string{"198.51.100.21/24"}})
	root := lab.SharedDir(t, "vipctl-frr-sup-")
	lab.WriteFRRConf(t, root,
		"frr defaults traditional",
		"hostname n0",
		"router bgp 64513",
		" bgp router-id 198.51.100.21",
		" neighbor 198.51.100.1 remote-as 64512",
		"exit",
	)
	run := filepath.Join(root, render.FRRRunDir)
	start := func() *netlab.Proc {
		t.Helper()
		p := h.Start("frr", bin, "frr", "--root", root)
		lab.WaitFor(t, 20*time.Second, "bgpd's vty socket", func() bool {
			_, err := os.Stat(filepath.Join(run, "bgpd.vty"))
			return err == nil
		})
		fr := &lab.FRR{Dir: root, Host: h}
		lab.WaitFor(t, 10*time.Second, "bgpd with frr.conf", func() bool {
			out, _ := fr.Vtysh("show running-config")
			return strings.Contains(out, "neighbor 198.51.100.1 remote-as 64512")
		})
		return p
	}
	pids := func() map[string]int {
		out := map[string]int{}
		for _, d := range []string{"zebra", "bfdd", "bgpd"} {
			b, err := os.ReadFile(filepath.Join(run, d+".pid"))
			if err != nil {
				t.Fatalf("%s pid file: %v", d, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			out[d] = pid
		}
		return out
	}
	gone := func(what string, ps map[string]int) {
		t.Helper()
		for d, pid := range ps {
			lab.WaitFor(t, 10*time.Second, d+" gone "+what, func() bool { return syscall.Kill(pid, 0) != nil })
		}
	}

	p := start()
	ps := pids()
	if err := syscall.Kill(ps["bgpd"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(15 * time.Second); err == nil {
		t.Errorf("vipctl frr exited 0 after bgpd died; want an error so the kubelet restarts the container\n%s", p.LogTail(10))
	} else if !strings.Contains(p.LogTail(5), "bgpd exited") {
		t.Errorf("vipctl frr: %v; log does not name bgpd:\n%s", err, p.LogTail(10))
	}
	gone("after bgpd died", ps)

	p = start()
	ps = pids()
	if err := syscall.Kill(p.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(15 * time.Second); err != nil {
		t.Errorf("vipctl frr on SIGTERM: %v\n%s", err, p.LogTail(10))
	}
	gone("after SIGTERM", ps)
}

// TestBGPReloadSendsOnlyNetworks: a new frr.conf that differs from the
// running one in `network` lines only (Services' addresses announced or
// withdrawn) reaches the real bgpd through one vtysh session, without
// frr-reload.py (the test's stand-in for it fails, so falling back would
// fail the reload); any other difference goes through frr-reload.py.
func TestBGPReloadSendsOnlyNetworks(t *testing.T) {
	h := netlab.New(t).AddHost("n0", netlab.HostOpts{Addrs: []string{"198.51.100.21/24", "2001:db8:100::21/64"}})
	root := lab.SharedDir(t, "vipctl-frr-delta-")
	confWith := func(timers string, v4, v6 []string) []string {
		lines := []string{"frr defaults traditional", "hostname n0", "router bgp 64513",
			" bgp router-id 198.51.100.21", " no bgp network import-check", " no bgp default ipv4-unicast",
			" neighbor 198.51.100.1 remote-as 64512", " neighbor 198.51.100.1 timers " + timers,
			" address-family ipv4 unicast"}
		for _, n := range v4 {
			lines = append(lines, "  network "+n)
		}
		lines = append(lines, "  neighbor 198.51.100.1 activate", " exit-address-family", " address-family ipv6 unicast")
		for _, n := range v6 {
			lines = append(lines, "  network "+n)
		}
		return append(lines, " exit-address-family", "exit")
	}
	old := confWith("1 3", []string{"203.0.113.240/32"}, []string{"2001:db8:300::/128"})
	lab.WriteFRRConf(t, root, old...)
	f := lab.StartFRR(t, h, root)
	conf := filepath.Join(root, render.FRRConfPath)
	// applied is what bgpd runs: the file as the last reload that
	// succeeded left it (a failed one leaves the new file on disk).
	applied, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(reloader string, lines []string) error {
		t.Helper()
		lab.WriteFRRConf(t, root, lines...)
		after, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := frr.Reload(t.Context(), host.Target{Root: root, FRRReload: reloader}, applied, after)
		if err == nil && !ok {
			t.Fatal("Reload found no running bgpd")
		}
		if err == nil {
			applied = after
		}
		return err
	}
	running := func() string {
		t.Helper()
		out, err := f.Vtysh("show running-config")
		if err != nil {
			t.Fatalf("show running-config: %v\n%s", err, out)
		}
		return out
	}
	// Announced and withdrawn in both families at once.
	next := confWith("1 3", []string{"203.0.113.241/32"}, []string{"2001:db8:300::1/128"})
	if err := apply("/bin/false", next); err != nil {
		t.Fatalf("a change of network lines went to frr-reload.py: %v", err)
	}
	cfg := running()
	for _, want := range []string{"network 203.0.113.241/32", "network 2001:db8:300::1/128"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("running config lacks %q:\n%s", want, cfg)
		}
	}
	for _, gone := range []string{"network 203.0.113.240/32", "network 2001:db8:300::/128"} {
		if strings.Contains(cfg, gone) {
			t.Errorf("running config still has %q:\n%s", gone, cfg)
		}
	}
	// A timer is not a network line: frr-reload.py's turn.
	other := confWith("3 9", []string{"203.0.113.241/32"}, []string{"2001:db8:300::1/128"})
	if err := apply("/bin/false", other); err == nil {
		t.Fatal("a timer change did not go to frr-reload.py")
	}
	if err := apply("", other); err != nil {
		t.Fatalf("frr-reload.py: %v", err)
	}
	if cfg := running(); !strings.Contains(cfg, "timers 3 9") {
		t.Errorf("running config lacks the new timers:\n%s", cfg)
	}
}
