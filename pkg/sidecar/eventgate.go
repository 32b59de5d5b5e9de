package sidecar

import (
	"sync"
	"time"
)

// eventGate lets an Event about one thing (a foreign router, a stranger
// answering for a VIP) through at most once per every, so that the
// Node's Events stay readable while the thing persists. It remembers at
// most max things: the stale ones go first, and while max are fresh a
// new one gets no Event (its metric still counts it).
type eventGate[K comparable] struct {
	every time.Duration
	max   int

	mu   sync.Mutex
	last map[K]time.Time
}

func newEventGate[K comparable](every time.Duration, max int) *eventGate[K] {
	return &eventGate[K]{every: every, max: max, last: map[K]time.Time{}}
}

// allow tells whether k's Event goes out now, and if so records it.
func (g *eventGate[K]) allow(k K, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.last[k]; ok && now.Sub(last) < g.every {
		return false
	}
	if _, ok := g.last[k]; !ok && len(g.last) >= g.max {
		for key, t := range g.last {
			if now.Sub(t) >= g.every {
				delete(g.last, key)
			}
		}
		if len(g.last) >= g.max {
			return false
		}
	}
	g.last[k] = now
	return true
}
