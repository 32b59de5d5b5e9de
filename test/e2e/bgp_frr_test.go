package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
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
	run := filepath.Join(root, onnode.FRRRunDir)
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
