package render

import (
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestExcludedNodeHoldsNoServiceVIP: a node labelled
// node.kubernetes.io/exclude-from-external-load-balancers stays in its
// pools' instances at priority 1 (below every peer, so a peer preempts it
// make-before-break, as in a drain) and is never their preferred holder,
// while its other instances keep their priorities.
func TestExcludedNodeHoldsNoServiceVIP(t *testing.T) {
	before := groupsPlan(t, func(*cluster.State) {})
	after := groupsPlan(t, func(s *cluster.State) {
		for i := range s.Nodes {
			if s.Nodes[i].Name == "worker-a0" {
				s.Nodes[i].ExcludeServices = true
			}
		}
	})
	prio := func(p *Plan, key v1alpha1.InstanceKey, node string) (int, bool) {
		for _, inst := range p.instances {
			if inst.key != key {
				continue
			}
			for _, m := range inst.eligible {
				if m.node.Name == node {
					return m.priority, true
				}
			}
		}
		return 0, false
	}
	for k := range 3 {
		key := v1alpha1.PoolKey("rack-a", k)
		if got, ok := prio(after, key, "worker-a0"); !ok || got != excludedPriority {
			t.Errorf("%s: worker-a0 at %d (member %v), want %d", key, got, ok, excludedPriority)
		}
		if got, _ := prio(after, key, "worker-a1"); got < minPriority {
			t.Errorf("%s: worker-a1 at %d, below a node that may hold it", key, got)
		}
	}
	// Three instances over two nodes: the one node left is preferred for
	// at least one, and never the excluded one.
	preferred := 0
	for k := range 3 {
		if got, _ := prio(after, v1alpha1.PoolKey("rack-a", k), "worker-a1"); got == preferredPriority {
			preferred++
		}
	}
	if preferred == 0 {
		t.Errorf("worker-a1 is preferred for no rack-a instance")
	}
	for _, key := range []v1alpha1.InstanceKey{v1alpha1.KeyAPI, v1alpha1.IngressKey("default")} {
		for _, n := range []string{"worker-a0", "master-0"} {
			b, _ := prio(before, key, n)
			a, _ := prio(after, key, n)
			if a != b {
				t.Errorf("%s on %s: priority %d -> %d; only Service instances change", key, n, b, a)
			}
		}
	}
}
