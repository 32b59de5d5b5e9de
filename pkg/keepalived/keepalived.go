// Package keepalived is keepalived's one home in vipctl: its config
// (Config, the template keepalived.conf.tmpl, Write; pkg/render fills
// Config from the plan), its command line (Args), its judge (Check), and
// the running daemon reached: its parent's PID through the PID file Args
// names, and the reload.
package keepalived

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// ErrNotRunning is PID's error when keepalived has written no PID file
// (not started yet, or not on this node).
var ErrNotRunning = errors.New("not running: no " + onnode.KeepalivedPIDFile)

// PID is the PID of keepalived's parent on the node, in the keepalived
// pod's PID namespace, from its PID file.
func PID(t host.Target) (int, error) {
	data, err := os.ReadFile(t.Path(onnode.KeepalivedPIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrNotRunning
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: no PID in %q", onnode.KeepalivedPIDFile, data)
	}
	return pid, nil
}

// Reload sends SIGHUP to keepalived's parent: keepalived re-reads the
// config and keeps VRRP state for instances whose settings did not
// change. false means keepalived is not running yet (it will read the
// file when it starts).
func Reload(t host.Target) (bool, error) {
	pid, err := PID(t)
	if errors.Is(err, ErrNotRunning) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("reloading keepalived (pid %d): %w", pid, err)
	}
	return true, nil
}
