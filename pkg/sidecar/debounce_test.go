package sidecar

import (
	"testing"
	"time"
)

// TestNextSync: after a sync the next waits syncShare times as long as it
// took (a fifth of the sidecar's time at most goes to syncing while
// changes keep coming), and never longer than the debounce.
func TestNextSync(t *testing.T) {
	start := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	const debounce = 200 * time.Millisecond
	for _, c := range []struct {
		name string
		took time.Duration
		want time.Duration // after the sync's end
	}{
		{"a cheap sync", 10 * time.Millisecond, 40 * time.Millisecond},
		{"a dear one", 40 * time.Millisecond, 160 * time.Millisecond},
		{"dearer than a fifth of the debounce", 130 * time.Millisecond, debounce},
		{"nothing to do", 0, 0},
	} {
		end := start.Add(c.took)
		if got := nextSync(start, end, debounce).Sub(end); got != c.want {
			t.Errorf("%s (%s): next sync %s after it, want %s", c.name, c.took, got, c.want)
		}
	}
}
