package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// startHaproxy runs the real haproxy as the haproxy pod does
// (manifests.HaproxyCommand under root), serving only a unix socket, and
// waits until its master socket answers; the returned func stops it.
func startHaproxy(t *testing.T, root string) (pid int, stop func()) {
	t.Helper()
	argv := manifests.HaproxyCommand(root)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("haproxy: %v (run hack/install-deps.sh)", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}
	t.Cleanup(stop)
	sock := filepath.Join(root, render.HaproxyMasterSocket)
	for i := 0; i < 200 && haproxyMasterPID(context.Background(), sock) == 0; i++ {
		select {
		case <-done:
			t.Fatalf("haproxy exited: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := haproxyMasterPID(context.Background(), sock); got != cmd.Process.Pid {
		t.Fatalf("master socket says master PID %d, haproxy runs as %d: %s", got, cmd.Process.Pid, out.String())
	}
	return cmd.Process.Pid, stop
}

// TestDaemonRestarts: a restart of keepalived (a new PID in its PID file)
// or of the real haproxy (a new master PID on its master socket, looked
// at while it was down too) counts once; the same PIDs again, or a daemon
// gone for a while and back under its old PID, count nothing.
func TestDaemonRestarts(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{render.RunDir, render.HaproxyRunDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sidecar{o: Options{OnceOptions: runtimecfg.OnceOptions{Target: host.Target{Root: root}}}}
	m := NewMetrics(nil)
	keepalived := func(pid int) {
		if err := os.WriteFile(filepath.Join(root, render.KeepalivedPIDFile), []byte(fmt.Sprintf("%d\n", pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := "global\n  maxconn 16\ndefaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n" +
		"frontend f\n  bind unix@" + filepath.Join(root, render.HaproxyRunDir, "f.sock") + "\n"
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, render.HaproxyConfPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, render.HaproxyConfPath), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	haproxyPID, stopHaproxy := startHaproxy(t, root)
	ctx := context.Background()
	var seen map[string]int
	look := func() { seen = m.observeDaemons(seen, s.readDaemonPIDs(ctx)) }
	restarts := func(d string) float64 { return testutil.ToFloat64(m.DaemonRestarts.WithLabelValues(d)) }

	keepalived(100)
	look()
	// Each daemon's series exists at 0 from its first sight, so that
	// increase() over it sees the first restart.
	if n := testutil.CollectAndCount(m.DaemonRestarts); n != 2 {
		t.Errorf("%d daemon_restarts_total series after the first look, want 2 (at 0)", n)
	}
	look()
	if k, h := restarts(DaemonKeepalived), restarts(DaemonHaproxy); k != 0 || h != 0 {
		t.Errorf("first looks: keepalived %v, haproxy %v restarts, want 0", k, h)
	}
	if seen[DaemonHaproxy] != haproxyPID || seen[DaemonKeepalived] != 100 {
		t.Errorf("PIDs seen %v, want keepalived 100, haproxy %d", seen, haproxyPID)
	}
	keepalived(140)
	stopHaproxy()
	look()
	startHaproxy(t, root)
	look()
	if k, h := restarts(DaemonKeepalived), restarts(DaemonHaproxy); k != 1 || h != 1 {
		t.Errorf("after new PIDs: keepalived %v, haproxy %v restarts, want 1 each", k, h)
	}
	if err := os.Remove(filepath.Join(root, render.KeepalivedPIDFile)); err != nil {
		t.Fatal(err)
	}
	look()
	keepalived(140)
	look()
	if k := restarts(DaemonKeepalived); k != 1 {
		t.Errorf("keepalived gone and back under the same PID: %v restarts, want 1", k)
	}
}
