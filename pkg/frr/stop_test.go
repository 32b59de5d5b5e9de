package frr

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStopAllKillsEveryStubbornDaemon: three daemons that ignore SIGTERM
// are each killed once the shared grace is over, the last as the first
// (a one-shot timer left the second waiting for good), and each kill is
// said.
func TestStopAllKillsEveryStubbornDaemon(t *testing.T) {
	var procs []*proc
	for _, name := range []string{"zebra", "bfdd", "bgpd"} {
		cmd := exec.Command("sh", "-c", "trap '' TERM; while :; do sleep 1; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
		go func() { p.err = cmd.Wait(); close(p.done) }()
		procs = append(procs, p)
	}
	// Let the shells install their trap before they are told.
	time.Sleep(200 * time.Millisecond)
	var out bytes.Buffer
	stopped := make(chan struct{})
	go func() { stopAll(procs, 100*time.Millisecond, &out); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
		t.Fatal("stopAll still waits on daemons that ignore SIGTERM, long after its grace")
	}
	for _, p := range procs {
		if p.cmd.ProcessState == nil || p.cmd.ProcessState.ExitCode() != -1 {
			t.Errorf("%s: %v, want killed", p.name, p.cmd.ProcessState)
		}
		if !strings.Contains(out.String(), p.name+" did not stop within") {
			t.Errorf("no word of %s's kill in %q", p.name, out.String())
		}
	}
}
