package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
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
