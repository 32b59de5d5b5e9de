package sidecar

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/test/daemontest"
)

// TestDaemonRestarts: a restart of keepalived (a new PID in its PID file)
// or of the real haproxy (a new master PID on its master socket, looked
// at while it was down too) counts once; the same PIDs again, or a daemon
// gone for a while and back under its old PID, count nothing.
func TestDaemonRestarts(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{onnode.RunDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sidecar{o: Options{OnceOptions: runtimecfg.OnceOptions{Target: host.Target{Root: root}}}}
	m := NewMetrics(nil)
	keepalived := func(pid int) {
		if err := os.WriteFile(filepath.Join(root, onnode.KeepalivedPIDFile), []byte(fmt.Sprintf("%d\n", pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	haproxyPID, stopHaproxy := daemontest.StartHaproxy(t, root)
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
	daemontest.StartHaproxy(t, root)
	look()
	if k, h := restarts(DaemonKeepalived), restarts(DaemonHaproxy); k != 1 || h != 1 {
		t.Errorf("after new PIDs: keepalived %v, haproxy %v restarts, want 1 each", k, h)
	}
	if err := os.Remove(filepath.Join(root, onnode.KeepalivedPIDFile)); err != nil {
		t.Fatal(err)
	}
	look()
	keepalived(140)
	look()
	if k := restarts(DaemonKeepalived); k != 1 {
		t.Errorf("keepalived gone and back under the same PID: %v restarts, want 1", k)
	}
}
