package sidecar

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/render"
)

// Daemons whose restarts the sidecar counts (daemon_restarts_total).
const (
	DaemonKeepalived = "keepalived"
	DaemonHaproxy    = "haproxy"
)

// readDaemonPIDs reads the PIDs of this node's daemons (DaemonPIDs).
func (s *Sidecar) readDaemonPIDs(ctx context.Context) map[string]int {
	return DaemonPIDs(ctx, s.o.Target)
}

// DaemonPIDs reads the PIDs of keepalived's parent (its PID file) and of
// haproxy's master (its master socket's `show proc`), by daemon name; a
// daemon not running, or not on this node (haproxy on a worker), is left
// out. vipctl diagnose records them too.
func DaemonPIDs(ctx context.Context, t host.Target) map[string]int {
	pids := map[string]int{}
	if data, err := os.ReadFile(t.Path(render.KeepalivedPIDFile)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
			pids[DaemonKeepalived] = pid
		}
	}
	if pid := haproxyMasterPID(ctx, t.Path(render.HaproxyMasterSocket)); pid > 0 {
		pids[DaemonHaproxy] = pid
	}
	return pids
}

// haproxyMasterPID asks haproxy's master socket for the master's PID: the
// line of `show proc` whose type is master. 0 when it does not answer.
func haproxyMasterPID(ctx context.Context, sock string) int {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return 0
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("show proc\n")); err != nil {
		return 0
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[1] == "master" {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
	}
	return 0
}

// observeDaemons counts a restart for each daemon whose PID differs from
// the one seen last (the container restarted: keepalived's pod shares
// one PID namespace, haproxy's master is the container's first process
// under a new PID after each start). prev is what the last call returned.
func (m *Metrics) observeDaemons(prev, now map[string]int) map[string]int {
	next := make(map[string]int, len(prev))
	for d, pid := range prev {
		next[d] = pid
	}
	for d, pid := range now {
		// The series exists at 0 from the first sight of the daemon:
		// increase() (VipctlDaemonRestarting) misses the increment that
		// creates a series.
		restarts := m.DaemonRestarts.WithLabelValues(d)
		if old, seen := prev[d]; seen && old != pid {
			restarts.Inc()
		}
		next[d] = pid
	}
	return next
}
