package lab

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/internal/netlab"
	"github.com/vipctl/vipctl/pkg/render"
)

// FRR is one FRR instance of the lab (zebra + bgpd), started by PID in a
// host's namespace with its config, vty sockets and pid files under its
// own directory: never the system service, never /etc/frr or /run/frr.
type FRR struct {
	// Dir holds etc/frr/frr.conf and run/frr (the layout of a node's
	// root, so a node's Target.Root is its FRR's Dir).
	Dir   string
	Host  *netlab.Host
	Zebra *netlab.Proc
	Bgpd  *netlab.Proc
	Bfdd  *netlab.Proc
}

// StartFRR runs zebra, bgpd and bfdd in h with dir's etc/frr/frr.conf
// and waits until bgpd answers on its vty socket. Without an frr.conf yet
// (a node with no bgp pool so far) bgpd starts empty: the node's
// Reconcile pushes the file through frr-reload.py once it renders one.
func StartFRR(t testing.TB, h *netlab.Host, dir string) *FRR {
	t.Helper()
	RequireFRR(t)
	run := filepath.Join(dir, render.FRRRunDir)
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	// The daemons drop to user frr, which must create its sockets here
	// and read the config on the way (dir's parents are 0755).
	u, err := user.Lookup("frr")
	if err != nil {
		t.Fatalf("FRR's user: %v (run hack/install-deps.sh)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(run, uid, gid); err != nil {
		t.Fatal(err)
	}
	zserv := filepath.Join(run, "zserv.api")
	conf := filepath.Join(dir, render.FRRConfPath)
	empty := filepath.Join(run, "empty.conf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &FRR{Dir: dir, Host: h}
	f.Zebra = h.Start("zebra", "/usr/lib/frr/zebra", "-i", filepath.Join(run, "zebra.pid"), "-z", zserv, "--vty_socket", run, "-f", empty)
	WaitFor(t, 10*time.Second, h.Name+" zebra up", func() bool { return exists(zserv) })
	f.Bfdd = h.Start("bfdd", "/usr/lib/frr/bfdd", "-i", filepath.Join(run, "bfdd.pid"), "-z", zserv, "--vty_socket", run, "-f", empty,
		"--bfdctl", filepath.Join(run, "bfdd.sock"))
	if !exists(conf) {
		// FRR 8.4's bgpd starts with a missing -f file too, but says so
		// nowhere we read; an explicit empty config says what it runs.
		conf = empty
	}
	f.Bgpd = h.Start("bgpd", "/usr/lib/frr/bgpd", "-i", filepath.Join(run, "bgpd.pid"), "-z", zserv, "--vty_socket", run, "-f", conf)
	WaitFor(t, 10*time.Second, h.Name+" bgpd up", func() bool { return exists(filepath.Join(run, "bgpd.vty")) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- %s bgpd log:\n%s", h.Name, f.Bgpd.LogTail(20))
			out, _ := f.Vtysh("show bgp summary")
			t.Logf("--- %s show bgp summary:\n%s", h.Name, out)
		}
	})
	return f
}

// Vtysh runs one vtysh command against this instance.
func (f *FRR) Vtysh(cmd string) (string, error) {
	out, err := f.Host.Exec("vtysh", "--vty_socket", filepath.Join(f.Dir, render.FRRRunDir), "-c", cmd)
	return string(out), err
}

// Stop stops bgpd, bfdd and zebra (by PID, through netlab).
func (f *FRR) Stop() {
	for _, p := range []*netlab.Proc{f.Bgpd, f.Bfdd, f.Zebra} {
		p.Stop()
	}
}

// RequireFRR fails the test when FRR is not installed.
func RequireFRR(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"/usr/lib/frr/bgpd", "/usr/lib/frr/zebra", "/usr/lib/frr/frr-reload.py"} {
		if !exists(bin) {
			t.Fatalf("%s missing: run hack/install-deps.sh", bin)
		}
	}
	if _, err := exec.LookPath("vtysh"); err != nil {
		t.Fatal("vtysh missing: run hack/install-deps.sh")
	}
}

// WriteFRRConf writes dir's etc/frr/frr.conf (for a router the lab plays).
func WriteFRRConf(t testing.TB, dir string, lines ...string) {
	t.Helper()
	conf := filepath.Join(dir, render.FRRConfPath)
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
