package sidecar

import (
	"context"

	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/keepalived"
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

// DaemonPIDs reads the PIDs of keepalived's parent (keepalived.PID) and
// of haproxy's master (haproxy.MasterPID), by daemon name; a daemon not
// running, or not on this node (haproxy on a worker), is left out.
// vipctl diagnose records them too.
func DaemonPIDs(ctx context.Context, t host.Target) map[string]int {
	pids := map[string]int{}
	if pid, err := keepalived.PID(t); err == nil {
		pids[DaemonKeepalived] = pid
	}
	if pid := haproxy.MasterPID(ctx, t); pid > 0 {
		pids[DaemonHaproxy] = pid
	}
	return pids
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
