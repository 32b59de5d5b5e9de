package e2e

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/frr"
)

// TestBGPSidecarRestartKeepsRoutes: a node's sidecar restarted (its
// container's crash or upgrade: the pod's FRR keeps running) leaves the
// node's BGP session and routes alone. With the real apiserver and every
// node's real sidecar, a client behind the router dials the Cluster
// Service address every 10 ms while b0's sidecar stops, stays away two
// seconds and starts again as its container does (runtimecfg --once from
// the files on disk, then the sidecar); the router's route keeps all
// three next hops at every 20 ms sample, no dial fails, and b0's session
// is never reset (bgpd's count of drops unchanged).
func TestBGPSidecarRestartKeepsRoutes(t *testing.T) {
	bl, kc := startBGPSidecars(t, nil)
	all := []string{"198.51.100.21", "203.0.113.21", "203.0.113.22"}
	b0 := bl.lc.ByName["b0"]
	drops := func() int {
		peers, ok, err := frr.ReadSessions(context.Background(), b0.Target)
		if err != nil || !ok || len(peers) != 1 {
			t.Fatalf("b0's sessions: %v, running %v, err %v", peers, ok, err)
		}
		return peers[0].Dropped
	}
	before := drops()

	var failed, dials, short atomic.Int64
	var shortHops atomic.Value
	polling, stop := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		for polling.Err() == nil {
			ctx, cancel := context.WithTimeout(polling, 200*time.Millisecond)
			c, err := bl.client.DialContext(ctx, "tcp", net.JoinHostPort(bgpClusterVIP, "8080"))
			cancel()
			if err != nil && polling.Err() == nil {
				failed.Add(1)
			} else if err == nil {
				_ = c.Close()
			}
			dials.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for polling.Err() == nil {
			if hops := bl.nextHops(bgpClusterVIP); !slices.Equal(hops, all) {
				short.Add(1)
				shortHops.Store(hops)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	kc.Sidecars["b0"].Stop()
	time.Sleep(2 * time.Second)
	kc.RestartSidecar(t, "b0")
	time.Sleep(5 * time.Second)
	stop()
	<-done
	<-done
	if n := short.Load(); n > 0 {
		t.Errorf("the router's route lost a next hop in %d samples while b0's sidecar restarted (last %v)", n, shortHops.Load())
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d dials failed while b0's sidecar restarted", n, dials.Load())
	}
	if after := drops(); after != before {
		t.Errorf("b0's session was reset while its sidecar restarted: %d drops, %d before", after, before)
	}
	t.Logf("b0's sidecar restarted: %d dials, %d failed; next hops short in %d samples; session drops %d before and after", dials.Load(), failed.Load(), short.Load(), before)
}
