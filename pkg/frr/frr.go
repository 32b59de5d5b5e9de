// Package frr is vipctl's side of FRR for bgp pools: the daemons and their
// command lines (Daemons, Run: the keepalived pod's frr container), the
// reload of a new frr.conf through frr-reload.py (Reload), and reading
// bgpd's sessions back (ReadSessions, Sessions). Its rule: FRR is reached
// only through vtysh and frr-reload.py on the node's vty sockets, never by
// writing its state directly; frr.conf itself is rendered by pkg/render and
// judged by pkg/configcheck.
package frr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Name names FRR among the daemons an Apply reloads.
const Name = "frr"

// defaultFRRReload is where Debian's frr-pythontools installs it.
const defaultFRRReload = frrLibDir + "/frr-reload.py"

// Reload brings the running bgpd in line with the frr.conf just
// written, through frr-reload.py: it diffs the file against `show
// running-config` and sends only the difference over the vty sockets, so
// a new or withdrawn /32 is one `network` line and no BGP session is
// reset (a full reload would drop every session and every route
// upstream). false means bgpd is not running yet: it reads the file when
// it starts.
//
// It first waits for bgpd to be zebra's client (zebraClient): a BFD
// peer given to a bgpd that is not yet would never get its session
// (Daemons).
func Reload(ctx context.Context, t host.Target) (bool, error) {
	vty, running := bgpdRunning(t)
	if !running {
		return false, nil
	}
	if err := zebraClient(ctx, t, vty); err != nil {
		return false, err
	}
	scratch, err := os.MkdirTemp(t.TempDir, "vipctl-frr-reload-")
	if err != nil && t.TempDir != "" {
		// Not there or not writable (a bootstrap host's image without
		// the frr container's /var/tmp): the system's temporary
		// directory then.
		t.TempDir = ""
		scratch, err = os.MkdirTemp("", "vipctl-frr-reload-")
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	bin := t.FRRReload
	if bin == "" {
		bin = defaultFRRReload
	}
	vtysh, err := exec.LookPath(vtysh(t))
	if err != nil {
		return false, fmt.Errorf("reloading FRR: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "--reload", "--stdout", "--log-level", "error",
		"--vty_socket", vty, "--bindir", filepath.Dir(vtysh), "--confdir", t.Path(onnode.FRRDir), "--rundir", scratch,
		t.Path(onnode.FRRConfPath))
	if t.TempDir != "" {
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("reloading FRR (frr-reload.py): %s: %w", boundOutput(out), err)
	}
	return true, nil
}

// zebraWait bounds how long Reload waits for bgpd to reach zebra: well
// under a second after bgpd's start in the lab.
const zebraWait = 10 * time.Second

// zebraClient waits until zebra lists bgpd among its clients (`show
// zebra client summary`), asking every 50 ms.
func zebraClient(ctx context.Context, t host.Target, vty string) error {
	ctx, cancel := context.WithTimeout(ctx, zebraWait)
	defer cancel()
	var last string
	for {
		out, err := exec.CommandContext(ctx, vtysh(t), "--vty_socket", vty, "-d", "zebra", "-c", "show zebra client summary").CombinedOutput()
		last = boundOutput(out)
		if err == nil && hasClient(string(out), "bgp") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bgpd is no client of zebra %s after its start (show zebra client summary: %s)", zebraWait, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hasClient tells whether a `show zebra client summary` lists name.
func hasClient(summary, name string) bool {
	for _, line := range strings.Split(summary, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// bgpdRunning tells where the node's FRR vty sockets are and whether
// bgpd listens there yet.
func bgpdRunning(t host.Target) (vtyDir string, running bool) {
	vty := t.Path(onnode.FRRRunDir)
	_, err := os.Stat(bgpdVty(vty))
	return vty, !errors.Is(err, os.ErrNotExist)
}

// bgpdVty is bgpd's vty socket in the run directory run: it exists once
// bgpd serves (Daemons waits for it, bgpdRunning looks for it).
func bgpdVty(run string) string { return filepath.Join(run, "bgpd.vty") }

// vtysh is the vtysh every FRR command of the node goes through.
func vtysh(t host.Target) string { return orDefault(t.Vtysh, "vtysh") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// boundOutput keeps a failing reload's message short enough for a log
// line and an Event.
func boundOutput(out []byte) string {
	const limit = 1000
	if len(out) > limit {
		return string(out[len(out)-limit:])
	}
	return string(out)
}
