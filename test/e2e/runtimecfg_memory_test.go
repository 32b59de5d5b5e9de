package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var benchHeapProfile = flag.String("bench-heap-profile", "", "BenchmarkRuntimecfg: a directory for the sidecar's heap profiles after the initial render (rendered.pprof) and at the end (end.pprof), its log with GODEBUG=gctrace=1 (sidecar.log) and its resident set sampled every 100 ms (rss.tsv)")

// rssSampler reads a process's resident set every 100 ms and keeps the
// sample with the most: VmHWM says how high it went, the sample says
// what it was made of (anonymous memory, the Go heap and runtime, or
// pages mapped from the binary).
type rssSampler struct {
	mu   sync.Mutex
	peak rssSample
	log  strings.Builder
	stop chan struct{}
	done chan struct{}
}

type rssSample struct{ rss, anon, file int } // kB

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			c := rssSample{procStatusKB(pid, "VmRSS:"), procStatusKB(pid, "RssAnon:"), procStatusKB(pid, "RssFile:")}
			s.mu.Lock()
			if c.rss > s.peak.rss {
				s.peak = c
			}
			fmt.Fprintf(&s.log, "%.1f\t%d\t%d\t%d\n", time.Since(start).Seconds(), c.rss, c.anon, c.file)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Peak stops sampling and returns the largest sample's anonymous and
// file-backed parts, in MiB, and the samples (seconds, VmRSS, RssAnon,
// RssFile in kB, tab-separated).
func (s *rssSampler) Peak() (anonMiB, fileMiB int, samples string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return (s.peak.anon + 1023) / 1024, (s.peak.file + 1023) / 1024, s.log.String()
}

// heapProfiler has the sidecar write heap profiles (runtimecfg
// --heap-profile, at SIGUSR2) into -bench-heap-profile; nil when the flag
// is not given.
type heapProfiler struct{ dir string }

func newHeapProfiler(b *testing.B) *heapProfiler {
	b.Helper()
	if *benchHeapProfile == "" {
		return nil
	}
	if err := os.MkdirAll(*benchHeapProfile, 0o755); err != nil {
		b.Fatal(err)
	}
	return &heapProfiler{dir: *benchHeapProfile}
}

// Args are the sidecar's flags and Env its environment: its collections
// logged, and an allocation sampled every 4 KiB instead of 512 (the
// caches are tens of MiB: the default would name a dozen sites).
func (h *heapProfiler) Args() []string {
	if h == nil {
		return nil
	}
	return []string{"--heap-profile", filepath.Join(h.dir, "heap.pprof")}
}

func (h *heapProfiler) Env() []string {
	if h == nil {
		return nil
	}
	return append(os.Environ(), "GODEBUG=gctrace=1,memprofilerate=4096")
}

// Take has the sidecar write a heap profile and keeps it as name.
func (h *heapProfiler) Take(b *testing.B, p *benchProc, name string) {
	b.Helper()
	if h == nil {
		return
	}
	n := strings.Count(p.log.String(), "heap profile written")
	if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for strings.Count(p.log.String(), "heap profile written") == n {
		if time.Now().After(deadline) {
			b.Fatalf("no heap profile from the sidecar; log:\n%s", p.log.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.Rename(filepath.Join(h.dir, "heap.pprof"), filepath.Join(h.dir, name)); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profile: %s", filepath.Join(h.dir, name))
}

// Save writes the sidecar's log and the resident set's samples beside
// the profiles.
func (h *heapProfiler) Save(b *testing.B, p *benchProc, samples string) {
	b.Helper()
	if h == nil {
		return
	}
	for name, data := range map[string]string{"sidecar.log": p.log.String(), "rss.tsv": "seconds\tvmrss_kb\trssanon_kb\trssfile_kb\n" + samples} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(data), 0o644); err != nil {
			b.Error(err)
		}
	}
}
