package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
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

// StartFRR runs zebra, bfdd and bgpd in h, as the frr container does
// (frr.Daemons, frr.LoadConfig), with dir as the node's root: bgpd reads
// dir's etc/frr/frr.conf (its BFD peers once it is zebra's client), or
// starts empty while there is none (a node that announces nothing yet).
func StartFRR(t testing.TB, h *netlab.Host, dir string) *FRR {
	t.Helper()
	RequireFRR(t)
	conf, err := frr.PrepareRun(dir)
	if err != nil {
		t.Fatalf("%v (run hack/install-deps.sh)", err)
	}
	f := &FRR{Dir: dir, Host: h}
	for _, d := range frr.Daemons(dir, conf) {
		p := h.Start(d.Name, d.Argv...)
		switch d.Name {
		case "zebra":
			f.Zebra = p
		case "bfdd":
			f.Bfdd = p
		case "bgpd":
			f.Bgpd = p
		}
		if d.Ready != "" {
			WaitFor(t, 10*time.Second, h.Name+" "+d.Name+" up", func() bool { return exists(d.Ready) })
		}
	}
	if err := frr.LoadConfig(t.Context(), host.Target{Root: dir}); err != nil {
		t.Fatalf("%s: %v\n%s", h.Name, err, f.Bgpd.LogTail(20))
	}
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
	out, err := f.Host.Exec("vtysh", "--vty_socket", filepath.Join(f.Dir, onnode.FRRRunDir), "-c", cmd)
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
	conf := filepath.Join(dir, onnode.FRRConfPath)
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
