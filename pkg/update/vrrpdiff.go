package update

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// vrrpDiff lists the VRRP changes no pool line shows, as "path: old ->
// new": an instance both configs have whose ID moves (a pin of
// spec.vrrp.virtualRouterIDs edited: the API's, an IngressController's,
// a pool instance's), and spec.vrrp.avoidVirtualRouterIDs. staticDiff
// leaves both out and the sidecars take both from the ConfigMap
// (cluster.Effective): they are day-2 parts, written with no
// MachineConfig. liveIDs and ids are live's and desired's IDs.
func vrrpDiff(live, desired *v1alpha1.ClusterVIPs, liveIDs, ids map[v1alpha1.InstanceKey]uint8) []string {
	pins := field.NewPath("spec", "vrrp", "virtualRouterIDs")
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if was, ok := liveIDs[k]; ok && was != ids[k] {
			out = append(out, fmt.Sprintf("%s: %d -> %d", pins.Key(k.String()), was, ids[k]))
		}
	}
	a, b := live.Spec.VRRP.AvoidVirtualRouterIDs, desired.Spec.VRRP.AvoidVirtualRouterIDs
	if !reflect.DeepEqual(a, b) {
		out = append(out, fmt.Sprintf("%s: %s -> %s", field.NewPath("spec", "vrrp", "avoidVirtualRouterIDs"), compact(a), compact(b)))
	}
	return out
}
