package status

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// WireNote is one node's view of a VIP on the wire that is not one
// answer from a member (its vipctl.io/wire annotation, issue 54).
type WireNote struct {
	Node string `json:"node"`
	v1alpha1.WireView
}

// attachWire hangs each node's fresh wire views (v1alpha1.WireViewFresh
// as of now) on their rows. A view of nobody answering a VIP nobody
// holds is left out: the row says no-holder already.
func (r *Report) attachWire(nodes []corev1.Node, now time.Time) []error {
	by := map[netip.Addr][]WireNote{}
	errs := published(nodes, v1alpha1.AnnotationNodeWire, v1alpha1.ParseWireViews, func(node string, v v1alpha1.WireView) {
		a, err := netip.ParseAddr(v.Address)
		if err != nil || now.Sub(v.At) > v1alpha1.WireViewFresh {
			return
		}
		by[a.Unmap()] = append(by[a.Unmap()], WireNote{Node: node, WireView: v})
	})
	for i := range r.VIPs {
		v := &r.VIPs[i]
		a, err := netip.ParseAddr(v.Address)
		if err != nil {
			continue
		}
		for _, n := range by[a] {
			if n.Answers == 0 && len(v.Holders) == 0 {
				continue
			}
			v.Wire = append(v.Wire, n)
		}
		sort.Slice(v.Wire, func(i, j int) bool { return v.Wire[i].Node < v.Wire[j].Node })
	}
	return errs
}

// wireLines says, per VIP with notes, what the nodes hear: a stranger's
// answer, nobody's, or more than one; each with the nodes that hear it.
func wireLines(rows []VIPStatus) []string {
	var out []string
	for _, v := range rows {
		var strangers, silent, twice []string
		strangerNodes := map[string][]string{}
		for _, n := range v.Wire {
			for _, mac := range n.Strangers {
				if !slices.Contains(strangers, mac) {
					strangers = append(strangers, mac)
				}
				strangerNodes[mac] = append(strangerNodes[mac], n.Node)
			}
			switch {
			case len(n.Strangers) > 0:
			case n.Answers == 0:
				silent = append(silent, n.Node)
			case n.Answers > 1:
				twice = append(twice, fmt.Sprintf("%s: %d", n.Node, n.Answers))
			}
		}
		sort.Strings(strangers)
		for _, mac := range strangers {
			out = append(out, fmt.Sprintf("%s is answered by %s, which is no member of %s (heard by %s)", v.Address, mac, v.Instance, strings.Join(strangerNodes[mac], ", ")))
		}
		if len(silent) > 0 {
			out = append(out, fmt.Sprintf("%s is held by %s and answered by nobody (asked by %s)", v.Address, holderText(v), strings.Join(silent, ", ")))
		}
		if len(twice) > 0 {
			out = append(out, fmt.Sprintf("%s is answered more than once (answers heard by %s)", v.Address, strings.Join(twice, ", ")))
		}
	}
	return out
}
