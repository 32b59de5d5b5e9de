package sidecar

import (
	"bytes"
	"context"
	"os"

	"github.com/vipctl/vipctl/pkg/onnode"
	"golang.org/x/sys/unix"
)

// drainLoop follows the drain file, whoever writes it (keepalived's
// preStop, an administrator), and has LocalVIPs act on it at once:
// keepalived lowers its priority the moment the file changes, and a peer
// takes over three adverts later (300 ms with the fast profile). Drained,
// the VIPs' local routes stay until the undrain.
func (s *Sidecar) drainLoop(ctx context.Context) {
	dir := s.o.Path(onnode.RunDir)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		s.log.Error("cannot follow the drain file; its changes take effect within a second", "err", err)
		return
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer func() { _ = f.Close() }()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		s.log.Error("cannot follow the drain file; its changes take effect within a second", "dir", dir, "err", err)
		return
	}
	go func() { <-ctx.Done(); _ = f.Close() }()
	buf := make([]byte, 4096)
	last := ""
	for {
		if data, err := os.ReadFile(s.o.Path(onnode.DrainFile)); err == nil {
			if now := string(bytes.TrimSpace(data)); now != last {
				s.log.Info("drain file changed", "drain", now)
				last = now
				s.m.Drained.Set(b2f(now == "1"))
				s.node.Local.Kick()
			}
		}
		// Any event in the directory: reading one small file is cheaper
		// than parsing the events.
		if _, err := f.Read(buf); err != nil || ctx.Err() != nil {
			return
		}
	}
}
