package render

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestRankedKeepsTheBest: the bounded selection a pool instance's members
// come from keeps exactly the members that sorting every eligible node by
// rank and cutting at maxHolders keeps (the rule before issue 47), for
// every bound, in any order the nodes come in.
func TestRankedKeepsTheBest(t *testing.T) {
	t.Parallel()
	var all []member
	for i := 0; i < 300; i++ {
		n := &cluster.Node{Name: fmt.Sprintf("node-%03d", i)}
		all = append(all, member{node: n, priority: priority(v1alpha1.PoolKey("p", 0), n.Name)})
	}
	// Ties on priority are decided by name: force some.
	all[7].priority, all[200].priority, all[42].priority = 250, 250, 250
	names := func(ms []member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.node.Name)
		}
		sort.Strings(out)
		return out
	}
	for _, max := range []int{0, 1, 2, 3, 8, 299, 300, 301} {
		for _, order := range []string{"as listed", "reversed"} {
			t.Run(fmt.Sprintf("max=%d/%s", max, order), func(t *testing.T) {
				t.Parallel()
				in := slices.Clone(all)
				if order == "reversed" {
					slices.Reverse(in)
				}
				want := slices.Clone(in)
				sort.SliceStable(want, func(i, j int) bool { return ranksAbove(want[i], want[j]) })
				if max > 0 && len(want) > max {
					want = want[:max]
				}
				r := ranked{max: max}
				for _, m := range in {
					r.offer(m)
				}
				if got, w := names(r.members), names(want); !slices.Equal(got, w) {
					t.Errorf("kept %v, want %v", got, w)
				}
			})
		}
	}
}
