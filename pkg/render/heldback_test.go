package render

import (
	"testing"

	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestHeldBackNodeNeverPreempts: a node rendered before its first sync is
// at priority 1 in every instance it is in (API, ingress, pools), below
// every peer, so it never takes a VIP from a synced peer; the peers'
// priorities are untouched.
func TestHeldBackNodeNeverPreempts(t *testing.T) {
	normal := groupsPlan(t, func(*cluster.State) {})
	held, err := NewPlan(normal.model, normal.ids, normal.state, WithHeldBack("worker-a0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(held.byNode["worker-a0"]) == 0 {
		t.Fatal("worker-a0 is in no instance")
	}
	for i, inst := range held.instances {
		for j, m := range inst.eligible {
			want := normal.instances[i].eligible[j].priority
			if m.node.Name == "worker-a0" {
				want = 1
			}
			if m.priority != want {
				t.Errorf("%s on %s: priority %d, want %d", inst.key, m.node.Name, m.priority, want)
			}
		}
	}
}
