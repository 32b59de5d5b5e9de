package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/netlab"
)

// PowerOff is what a power loss does to a node whose sidecar runs
// (StartSidecar): every process of it dies at once, nothing cleans up (the
// sidecar stopped, keepalived's parent and VRRP child and haproxy
// SIGKILLed), it leaves the network, and what lives only in the kernel and
// in /run is gone, as after a reboot: host addresses (VIPs) on the VRRP
// interface, vipctl's routes (protocol 118, every table) and rules, proxy
// neighbour entries, nftables, the interface settings the sidecar changed
// at run time, and the run directories. /etc and /var/lib (keepalived.conf,
// the last-good view) stay. PowerOn boots it.
func (kc *KubeCluster) PowerOff(t testing.TB, name string) {
	t.Helper()
	n := kc.ByName[name]
	if sc := kc.Sidecars[name]; sc != nil {
		sc.Stop()
	}
	n.CrashKeepalived(t)
	for _, p := range []*netlab.Proc{n.Keepalived, n.Haproxy} {
		if p != nil {
			_ = p.Signal(syscall.SIGKILL) // the whole group, whatever forked
			_ = p.Wait(5 * time.Second)
		}
	}
	n.Host.LinkDown()
	h := n.Host
	addrs, err := h.Exec("ip", "-o", "addr", "show", "dev", h.Iface)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(addrs), "\n") {
		f := strings.Fields(line)
		// "2: br-ex inet 198.51.100.128/32 scope global br-ex ..."
		if len(f) < 4 || (!strings.HasSuffix(f[3], "/32") && !strings.HasSuffix(f[3], "/128")) {
			continue
		}
		h.MustExec("ip", "addr", "del", f[3], "dev", h.Iface)
	}
	for _, fam := range []string{"-4", "-6"} {
		h.MustExec("ip", fam, "route", "flush", "table", "all", "proto", "118")
		rules, err := h.Exec("ip", fam, "rule", "show")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(rules), "\n") {
			// The kernel's own three (local, main, default) are all a
			// fresh namespace has.
			pref, rule, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || pref == "0" || pref == "32766" || pref == "32767" {
				continue
			}
			h.MustExec(append([]string{"ip", fam, "rule", "del", "pref", pref}, strings.Fields(rule)...)...)
		}
	}
	h.MustExec("ip", "-6", "neigh", "flush", "proxy")
	h.MustExec("nft", "flush", "ruleset")
	// The settings the sidecar changes at run time, back at the kernel's
	// defaults (proxy_delay in hundredths of a second); the MachineConfig's
	// come back at boot (PowerOn).
	if err := h.ApplySysctl([]byte("net/ipv4/conf/" + h.Iface + "/arp_ignore = 0\nnet/ipv4/conf/" + h.Iface + "/arp_announce = 0\nnet/ipv6/neigh/" + h.Iface + "/proxy_delay = 80\n")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{onnode.RunDir, onnode.HaproxyRunDir} {
		dir := filepath.Join(n.Target.Root, d)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// PowerOn boots a node PowerOff stopped, as a real one comes up: back on
// the network, the MachineConfig's kernel settings, then the static pods:
// the keepalived pod's init container (runtimecfg.Once, from the static
// config and the node's last-good view), then keepalived (and haproxy on
// control-plane nodes) and the sidecar container (RestartSidecar). The
// sidecar renders from the API once it answers.
func (kc *KubeCluster) PowerOn(t testing.TB, name string) {
	t.Helper()
	n := kc.ByName[name]
	n.Host.LinkUp()
	kc.applyBootSysctls(t, n.Host)
	if _, err := runtimecfg.Once(context.Background(), kc.onceOptions(name)); err != nil {
		t.Fatalf("%s: runtimecfg --once: %v", name, err)
	}
	if n.Haproxy != nil {
		n.Haproxy = n.Host.Start("haproxy", haproxy.Args(n.Target.Root)...)
	}
	n.StartKeepalived()
	kc.RestartSidecar(t, name)
}
