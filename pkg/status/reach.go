package status

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StateIsolated is a VIP two or more nodes claim, all but one of which
// have stopped reaching the API (their kubelet's Lease went unrenewed):
// their claims are what they published before, and the one node that
// still reaches the API is the VIP's holder as far as the cluster knows.
// A node cut off the segment keeps its annotation until it comes back:
// without this state every node loss read as a split brain for as long
// as that lasted (issue 54). It is still a problem (a node is away); a
// real split brain is two holders that both reach the API.
const StateIsolated = "isolated"

// NodeLeaseNamespace holds the kubelets' Leases, one per node, named
// after it, renewed every quarter of its duration (kubelet's
// nodeLeaseRenewIntervalFraction, 0.25: every 10 s at the default 40 s).
const NodeLeaseNamespace = "kube-node-lease"

// Reach is what the kubelets' Leases say of the nodes: when each last
// renewed, and by when it must renew again to count as reaching the API.
// The zero Reach knows no node.
type Reach struct {
	due, renewed map[string]time.Time
}

// ReachFromLeases reads the kubelets' Leases (NodeLeaseNamespace). A
// Lease without a renew time or duration is left out: its node counts as
// reachable.
func ReachFromLeases(leases []coordinationv1.Lease) Reach {
	r := Reach{due: map[string]time.Time{}, renewed: map[string]time.Time{}}
	for _, l := range leases {
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds <= 0 {
			continue
		}
		interval := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second / 4
		r.due[l.Name] = l.Spec.RenewTime.Add(time.Duration(missedRenewals * float64(interval)))
		r.renewed[l.Name] = l.Spec.RenewTime.Time
	}
	return r
}

// SilentSince tells whether node's kubelet has not renewed its Lease
// since t: a node without a Lease is not silent.
func (r Reach) SilentSince(node string, t time.Time) bool {
	renewed, ok := r.renewed[node]
	return ok && renewed.Before(t)
}

// missedRenewals is how many renew intervals may pass, and a half, before
// a node counts as not reaching the API: one is the kubelet's own pace,
// the half its lateness on a loaded node.
const missedRenewals = 1.5

// Unreachable tells whether node has gone longer than missedRenewals
// renew intervals without renewing its Lease, as of now.
func (r Reach) Unreachable(node string, now time.Time) bool {
	due, ok := r.due[node]
	return ok && now.After(due)
}

// Classify tells split brains from isolated holders: a row of two or more
// holders whose holders all but one are away becomes StateIsolated, the
// away ones listed as Unreachable. A holder is away when its Lease is
// overdue (Unreachable), or, at once, when another node claimed the VIP
// after it and its kubelet has not renewed its Lease since that claim:
// a node lost without a word (powered off, cut off) keeps its claim, and
// the node that took over claims after the lost node's last renewal. A
// real split brain's holders both keep renewing: within one renew
// interval (10 s at the kubelet's default) the older claimant has
// renewed after the newer claim, and the row is a split brain again.
// Without Leases (an empty Reach) nothing changes.
func (rep *Report) Classify(r Reach, now time.Time) {
	for i := range rep.VIPs {
		v := &rep.VIPs[i]
		if v.State != StateSplitBrain {
			continue
		}
		var newest time.Time
		for _, h := range v.Holders {
			if s := v.holderSince[h]; s.After(newest) {
				newest = s
			}
		}
		var away []string
		for _, h := range v.Holders {
			older := v.holderSince[h].Before(newest)
			if r.Unreachable(h, now) || older && r.SilentSince(h, newest) {
				away = append(away, h)
			}
		}
		if len(away) == len(v.Holders)-1 {
			sort.Strings(away)
			v.State = StateIsolated
			v.Unreachable = away
		}
	}
}

// holderText is the HOLDER column: every holder, an unreachable one
// marked.
func holderText(v VIPStatus) string {
	if len(v.Holders) == 0 {
		return "-"
	}
	out := make([]string, 0, len(v.Holders))
	for _, h := range v.Holders {
		if slices.Contains(v.Unreachable, h) {
			h += "(unreachable)"
		}
		out = append(out, h)
	}
	return strings.Join(out, ",")
}

// NodeReach lists the kubelets' Leases. An error (no permission to list
// them, for one) leaves the caller without Reach: Classify then changes
// nothing.
func NodeReach(ctx context.Context, kube kubernetes.Interface) (Reach, error) {
	list, err := kube.CoordinationV1().Leases(NodeLeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Reach{}, fmt.Errorf("listing the kubelets' Leases (%s), to tell isolated holders from split brains: %w", NodeLeaseNamespace, err)
	}
	return ReachFromLeases(list.Items), nil
}
