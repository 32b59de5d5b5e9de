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

// TestHeapProfileOnSignal: nothing is written before SIGUSR2; each one
// writes a heap profile (gzip) in place of the last, and no temporary
// file is left beside it.
func TestHeapProfileOnSignal(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "heap.pprof")
	var logs fixture.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heapProfileOnSignal(ctx, file, log)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a profile before any signal: %v", err)
	}
	for n := 1; n <= 2; n++ {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logs.String(), "heap profile written") < n {
			if time.Now().After(deadline) {
				t.Fatalf("no heap profile %d in the log: %s", n, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Fatalf("signal %d: not a gzipped profile: %d bytes", n, len(data))
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("want heap.pprof alone in %s, got %d entries", dir, len(entries))
	}
}
