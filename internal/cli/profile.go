package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// profileOnSignal writes CPU profiles of this process to file, each
// between two SIGUSR1 (the file is rewritten at every start), until ctx
// ends; a running profile is then written out. Labs and benchmarks use
// it to profile a window of a long run (the steady state after a load)
// that a profile from the start would drown. It returns at once, with
// a function that waits until a profile running at ctx's end is written.
func profileOnSignal(ctx context.Context, file string, log *slog.Logger) (wait func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(sig)
		var out *os.File
		stop := func() {
			if out == nil {
				return
			}
			pprof.StopCPUProfile()
			if err := out.Close(); err != nil {
				log.Error("writing the CPU profile", "file", file, "err", err)
			} else {
				log.Info("CPU profile written", "file", file)
			}
			out = nil
		}
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			if out != nil {
				stop()
				continue
			}
			f, err := os.Create(file)
			if err == nil {
				err = pprof.StartCPUProfile(f)
				if err != nil {
					_ = f.Close()
				}
			}
			if err != nil {
				log.Error("starting a CPU profile", "file", file, "err", fmt.Errorf("--cpu-profile: %w", err))
				continue
			}
			out = f
			log.Info("CPU profile started", "file", file)
		}
	}()
	return func() { <-done }
}

// heapProfileOnSignal writes a heap profile of this process to file at
// every SIGUSR2 (replacing the last one), after a collection so that its
// in-use figures are those of that moment, until ctx ends. A benchmark
// takes one after a phase (the initial list and render, a churn) and
// moves it aside before it asks for the next.
func heapProfileOnSignal(ctx context.Context, file string, log *slog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			if err := writeHeapProfile(file); err != nil {
				log.Error("writing a heap profile", "file", file, "err", fmt.Errorf("--heap-profile: %w", err))
				continue
			}
			log.Info("heap profile written", "file", file)
		}
	}()
}

// writeHeapProfile writes the heap profile to a temporary file beside
// file and renames it, so a reader never sees half of one.
func writeHeapProfile(file string) error {
	runtime.GC()
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := pprof.Lookup("heap").WriteTo(tmp, 0); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
