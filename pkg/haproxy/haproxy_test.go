package haproxy_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/daemontest"
)

// TestMasterSocket, with the real haproxy as the haproxy pod runs it:
// before it starts, nothing answers (MasterPID 0, Reload false without an
// error); running, the master socket names the master, answers a command
// and takes a reload, after which a new worker serves under the same
// master.
func TestMasterSocket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	target := host.Target{Root: root}
	if pid := haproxy.MasterPID(ctx, target); pid != 0 {
		t.Errorf("MasterPID with no haproxy: %d, want 0", pid)
	}
	if ok, err := haproxy.Reload(ctx, target); ok || err != nil {
		t.Errorf("Reload with no haproxy: %v, %v; want false, nil", ok, err)
	}
	pid, _ := daemontest.StartHaproxy(t, root)
	sock := target.Path(onnode.HaproxyMasterSocket)
	// workers are the worker PIDs `show proc` lists; the master re-execs
	// on a reload, which resets a connection to its socket meanwhile.
	workers := func() ([]string, error) {
		out, err := haproxy.Command(ctx, sock, "show proc; quit", 5*time.Second, 1<<20)
		if err != nil {
			return nil, err
		}
		var ws []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[1] == "worker" {
				ws = append(ws, f[0])
			}
		}
		return ws, nil
	}
	before, err := workers()
	if err != nil || len(before) == 0 {
		t.Fatalf("show proc lists no worker (%v)", err)
	}
	if ok, err := haproxy.Reload(ctx, target); !ok || err != nil {
		t.Fatalf("Reload: %v, %v; want true, nil", ok, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := workers()
		if err == nil && len(after) > 0 && !slices.Contains(before, after[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new worker after the reload: %v before, %v now (%v)", before, after, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := haproxy.MasterPID(ctx, target); got != pid {
		t.Errorf("MasterPID after the reload: %d, want the master %s", got, strconv.Itoa(pid))
	}
}
