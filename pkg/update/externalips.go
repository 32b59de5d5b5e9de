package update

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// ReasonExternalIPOff is an Orphan's reason when an external IP a live
// pool announces lies in no desired pool with externalIPs.
const ReasonExternalIPOff = "no pool with externalIPs contains it any more: the nodes stop announcing it"

// lostExternalIPs lists the Services whose spec.externalIPs a live pool
// announces and no desired pool would: externalIPs turned off, the pool
// removed or shrunk, its namespaces narrowed, or the address become an
// anchor. Like a load-balancer address taken away, it is an orphan: the
// Service's clients lose it.
func lostExternalIPs(live, desired *v1alpha1.ClusterVIPs, services []corev1.Service) []Orphan {
	before, after := cluster.Compile(live), cluster.Compile(desired)
	var out []Orphan
	for i := range services {
		s := &services[i]
		if len(s.Spec.ExternalIPs) == 0 {
			continue
		}
		kept := map[netip.Addr]bool{}
		why := map[netip.Addr]string{}
		for _, e := range after.Pools.ExternalIPs(s, after.Class) {
			if e.Err == nil {
				kept[e.Addr] = true
			} else {
				why[e.Addr] = e.Err.Error()
			}
		}
		lost := map[string][]string{} // by reason
		var reasons []string
		for _, a := range before.ExternalIPs(s) {
			if kept[a] {
				continue
			}
			r, ok := why[a]
			if !ok {
				r = ReasonExternalIPOff
			}
			if _, seen := lost[r]; !seen {
				reasons = append(reasons, r)
			}
			lost[r] = append(lost[r], a.String())
		}
		for _, r := range reasons {
			out = append(out, Orphan{Service: s.Namespace + "/" + s.Name, Addresses: lost[r], Reason: r, ExternalIP: true})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}
