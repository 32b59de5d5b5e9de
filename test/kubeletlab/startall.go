package kubeletlab

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// StartAll starts several nodes as Start does, preparing them at the same
// time (the image imports take most of a node's start) and then starting
// every kubelet together: a cluster whose control plane runs as static
// pods forms its etcd quorum at once instead of one member at a time,
// while the first apiservers give up on it and back off.
func StartAll(t testing.TB, opts []Options) []*Node {
	t.Helper()
	nodes := make([]*Node, len(opts))
	g := &goroutineTB{TB: t}
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Go(func() { nodes[i] = prepare(g, o) })
	}
	wg.Wait()
	if len(g.failures) > 0 {
		t.Fatalf("kubeletlab: starting nodes: %s", strings.Join(g.failures, "; "))
	}
	for _, n := range nodes {
		n.t = t
		n.StartKubelet(t, n.kubeconfig)
	}
	return nodes
}

// goroutineTB is t for a goroutine other than the test's: a fatal failure
// ends only that goroutine (FailNow may not be called from any other
// than the test's) and is collected for the test's goroutine to report.
// Everything else (Cleanup, TempDir, Logf, Errorf) is t's own, which may
// be called from any goroutine.
type goroutineTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (g *goroutineTB) Helper() {}

func (g *goroutineTB) Fatal(args ...any) { g.fail(fmt.Sprint(args...)) }

func (g *goroutineTB) Fatalf(format string, args ...any) { g.fail(fmt.Sprintf(format, args...)) }

func (g *goroutineTB) FailNow() { g.fail("FailNow") }

func (g *goroutineTB) fail(msg string) {
	g.mu.Lock()
	g.failures = append(g.failures, msg)
	g.mu.Unlock()
	runtime.Goexit()
}
