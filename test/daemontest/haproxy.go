// Package daemontest runs the real daemons as their pods do, for the tests
// of the packages that reach them (pkg/haproxy, pkg/sidecar).
package daemontest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// StartHaproxy runs the real haproxy as the haproxy pod does
// (haproxy.Args under root) with a config that serves only a
// unix socket, and waits until its master socket answers with haproxy's
// own PID; stop ends it (and so does the test's cleanup).
func StartHaproxy(t testing.TB, root string) (pid int, stop func()) {
	t.Helper()
	cfg := "global\n  maxconn 16\ndefaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n" +
		"frontend f\n  bind unix@" + filepath.Join(root, onnode.HaproxyRunDir, "f.sock") + "\n"
	for _, d := range []string{onnode.HaproxyRunDir, filepath.Dir(onnode.HaproxyConfPath)} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, onnode.HaproxyConfPath), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := haproxy.Args(root)
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
	target := host.Target{Root: root}
	for i := 0; i < 200 && haproxy.MasterPID(context.Background(), target) == 0; i++ {
		select {
		case <-done:
			t.Fatalf("haproxy exited: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := haproxy.MasterPID(context.Background(), target); got != cmd.Process.Pid {
		t.Fatalf("master socket says master PID %d, haproxy runs as %d: %s", got, cmd.Process.Pid, out.String())
	}
	return cmd.Process.Pid, stop
}
