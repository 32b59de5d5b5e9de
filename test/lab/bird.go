package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// BIRD is a BIRD 2 instance on a lab host: a second BGP implementation
// as the nodes' router, so that what the nodes' FRR speaks is proven
// against more than FRR.
type BIRD struct {
	Host *netlab.Host
	// Sock is its control socket (birdc -s).
	Sock string
	Proc *netlab.Proc
}

// RequireBIRD fails the test when BIRD is missing: hack/install-deps.sh
// installs it (Debian's bird2).
func RequireBIRD(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (run hack/install-deps.sh)", bin, err)
		}
	}
}

// StartBIRD runs bird in the foreground on h with the configuration conf
// (its lines), its socket and files in a directory of its own, and waits
// for its control socket; the test's end stops it (netlab, by PID), and a
// failed test logs its protocols.
func StartBIRD(t testing.TB, h *netlab.Host, conf ...string) *BIRD {
	t.Helper()
	RequireBIRD(t)
	dir := SharedDir(t, "vipctl-bird-")
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &BIRD{Host: h, Sock: filepath.Join(dir, "bird.ctl")}
	b.Proc = h.Start("bird", "bird", "-f", "-c", path, "-s", b.Sock)
	WaitFor(t, 10*time.Second, h.Name+" bird up", func() bool { return exists(b.Sock) })
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := b.Birdc("show protocols all")
			t.Logf("--- %s bird log:\n%s\n--- show protocols all:\n%s", h.Name, b.Proc.LogTail(20), out)
		}
	})
	return b
}

// Birdc runs one birdc command against this instance.
func (b *BIRD) Birdc(cmd ...string) (string, error) {
	out, err := b.Host.Exec(append([]string{"birdc", "-s", b.Sock}, cmd...)...)
	return string(out), err
}

// Established tells whether BIRD's BGP protocol name is up (its
// `show protocols` line says Established).
func (b *BIRD) Established(name string) bool {
	out, err := b.Birdc("show", "protocols", name)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return strings.Contains(line, "Established")
		}
	}
	return false
}
