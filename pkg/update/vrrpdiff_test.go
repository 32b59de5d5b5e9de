package update

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestVRRPEditAloneIsPlannedAndWritten: an edit of spec.vrrp's day-2
// parts alone (a pin that moves a VRRP ID, the IDs to avoid; the sidecars
// take both from the ConfigMap) is a plan line with its field path and
// both values, no reboot, and is written to the ConfigMap. On main the
// plan was empty and nothing was written: a pin moving an instance off an
// ID another cluster on the LAN took left it there.
func TestVRRPEditAloneIsPlannedAndWritten(t *testing.T) {
	t.Parallel()
	// live is the ConfigMap after a first update: every pool instance's
	// ID pinned.
	first, err := Compute(nil, fixture.Example(t, "pools-node-groups.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	live := first.Desired
	liveIDs, err := vrid.ForCluster(live)
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint8]bool{}
	for _, id := range liveIDs {
		used[id] = true
	}
	free := uint8(1)
	for used[free] {
		free++
	}
	edge0, api := v1alpha1.PoolKey("edge", 0), v1alpha1.KeyAPI
	cases := []struct {
		name string
		edit func(*v1alpha1.VRRPSpec)
		line string
	}{
		{"pool instance pin", func(v *v1alpha1.VRRPSpec) { v.VirtualRouterIDs[edge0.String()] = int(free) },
			fmt.Sprintf("spec.vrrp.virtualRouterIDs[pool/edge/0]: %d -> %d", liveIDs[edge0], free)},
		{"API pin", func(v *v1alpha1.VRRPSpec) { v.VirtualRouterIDs[api.String()] = int(free) },
			fmt.Sprintf("spec.vrrp.virtualRouterIDs[api]: %d -> %d", liveIDs[api], free)},
		{"avoid", func(v *v1alpha1.VRRPSpec) { v.AvoidVirtualRouterIDs = []int{int(free)} },
			fmt.Sprintf("spec.vrrp.avoidVirtualRouterIDs: [] -> [%d]", free)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			desired := *live
			desired.Spec.VRRP.VirtualRouterIDs = maps.Clone(live.Spec.VRRP.VirtualRouterIDs)
			tc.edit(&desired.Spec.VRRP)
			p, err := Compute(live, &desired, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.Empty() || len(p.VRRP) != 1 || p.VRRP[0] != tc.line || len(p.Pools) != 0 || len(p.Static) != 0 {
				t.Fatalf("plan: vrrp %q, pools %+v, static %v; want %q alone", p.VRRP, p.Pools, p.Static, tc.line)
			}
			if got, want := p.Text(), "~ "+tc.line+"\nno MachineConfig change: no node reboots\n"; got != want {
				t.Errorf("plan text:\n%s\nwant:\n%s", got, want)
			}

			got := appliedOver(t, live, p)
			if !reflect.DeepEqual(got.Spec.VRRP, desired.Spec.VRRP) {
				t.Errorf("the ConfigMap's spec.vrrp after the update:\n%+v\nwant:\n%+v", got.Spec.VRRP, desired.Spec.VRRP)
			}
		})
	}

	// Nothing edited: no line, although the file pins no pool instance
	// and the ConfigMap pins them all.
	p, err := Compute(live, fixture.Example(t, "pools-node-groups.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Empty() || len(p.VRRP) != 0 {
		t.Errorf("plan of the same file: vrrp %q, empty %v; want nothing", p.VRRP, p.Empty())
	}
}
