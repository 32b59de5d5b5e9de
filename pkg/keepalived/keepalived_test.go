package keepalived

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestPID: no PID file is ErrNotRunning (Reload: not running, no error),
// a file without a PID an error naming it, a PID the PID.
func TestPID(t *testing.T) {
	t.Parallel()
	target := host.Target{Root: t.TempDir()}
	if _, err := PID(target); !errors.Is(err, ErrNotRunning) {
		t.Errorf("no PID file: %v, want ErrNotRunning", err)
	}
	if ok, err := Reload(target); ok || err != nil {
		t.Errorf("Reload without a PID file: %v, %v; want false, nil", ok, err)
	}
	write := func(s string) {
		t.Helper()
		if _, err := target.WriteFile(onnode.KeepalivedPIDFile, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"", "abc\n", "1\n", "-5"} {
		write(bad)
		if _, err := PID(target); err == nil || errors.Is(err, ErrNotRunning) {
			t.Errorf("PID file %q: %v, want an error naming the file", bad, err)
		}
	}
	write("4242\n")
	if pid, err := PID(target); pid != 4242 || err != nil {
		t.Errorf("PID file 4242: %d, %v", pid, err)
	}
}

// TestReload: Reload sends SIGHUP to the process the PID file names (a
// shell that records the signal), and a PID of a process that has gone is
// not running, not an error.
func TestReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark, ready := filepath.Join(dir, "hup"), filepath.Join(dir, "ready")
	cmd := exec.Command("/bin/sh", "-c", `trap 'touch `+mark+`; exit 0' HUP; touch `+ready+`; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-done })
	target := host.Target{Root: dir}
	if _, err := target.WriteFile(onnode.KeepalivedPIDFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shell says when its trap is installed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never became ready")
		}
	}
	if ok, err := Reload(target); !ok || err != nil {
		t.Fatalf("Reload: %v, %v; want true, nil", ok, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not end on SIGHUP")
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the process ended without its HUP trap: %v", err)
	}
	if ok, err := Reload(target); ok || err != nil {
		t.Errorf("Reload of a process gone: %v, %v; want false, nil", ok, err)
	}
}
