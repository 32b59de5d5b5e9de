package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestProfileOnSignal: nothing is written before the first SIGUSR1; the
// second writes a profile (gzip), and one running when the context ends
// is written out before wait returns.
func TestProfileOnSignal(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	var logs fixture.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	wait := profileOnSignal(ctx, file, log)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a profile before any signal: %v", err)
	}
	isProfile := func(what string) {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v (log: %s)", what, err, logs.String())
		}
		if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Fatalf("%s: not a gzipped profile: %d bytes", what, len(data))
		}
	}
	signalSelf := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	waitLog := func(line string, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logs.String(), line) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %q (%d) in the log: %s", line, n, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	signalSelf()
	waitLog("CPU profile started", 1)
	signalSelf()
	waitLog("CPU profile written", 1)
	isProfile("after the second signal")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	signalSelf()
	waitLog("CPU profile started", 2)
	cancel()
	wait()
	isProfile("after the context ended")
}
