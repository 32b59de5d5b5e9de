// Package statuswriter keeps the status of the ClusterVIPs objects true:
// who holds each VIP of the spec and since when, how full each Service
// pool is, which generation of the spec each node runs, and the Ready and
// Degraded conditions. The allocator's leader runs it (one writer per
// cluster); what it reads is what `vipctl status` reads: the nodes'
// vipctl.io/vips and vipctl.io/config annotations and the Services'
// load-balancer addresses.
package statuswriter

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// Condition reasons.
const (
	ReasonAllHeld      = "AllHeld"
	ReasonNotHeld      = "VIPsNotHeld"
	ReasonNodesBehind  = "NodesBehind"
	ReasonAsExpected   = "AsExpected"
	ReasonSplitBrain   = "SplitBrain"
	ReasonNoHolder     = "NoHolder"
	ReasonPoolFull     = "PoolExhausted"
	ReasonUnreadable   = "UnreadableAnnotations"
	ReasonInvalidSpec  = "InvalidSpec"
	maxConditionSubset = 5
)

// Build computes the status of the object named name at generation gen
// with spec, from the nodes and Services, keeping what prev says where
// nothing changed (since when a VIP has had no holder, the last
// generation a node was seen running, the conditions' transition times).
func Build(name string, gen int64, spec v1alpha1.ClusterVIPsSpec, prev crd.ClusterVIPsStatus, nodes []corev1.Node, services []corev1.Service, now time.Time) crd.ClusterVIPsStatus {
	out := crd.ClusterVIPsStatus{ObservedGeneration: gen, Conditions: slices.Clone(prev.Conditions)}
	c := &v1alpha1.ClusterVIPs{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Spec: spec}
	c.Metadata.Name = name
	v1alpha1.SetDefaults(c)
	// The apiserver refuses most of what vipctl would, not all of it
	// (docs/api.md): a spec vipctl refuses has no VIPs to report on.
	if errs := v1alpha1.Validate(c); len(errs) > 0 {
		set(&out, gen, now, crd.ConditionReady, false, ReasonInvalidSpec, errs.ToAggregate().Error())
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonInvalidSpec, errs.ToAggregate().Error())
		return out
	}
	// What vipctl validate refuses beyond Validate leaves a spec the
	// sidecars still run (a pool ending on a broadcast address worked
	// before the check came): its VIPs are reported, the refusal too.
	var refused []string
	for _, e := range v1alpha1.ValidateNodes(c, nil) {
		refused = append(refused, e.Error())
	}
	if _, err := vrid.ForCluster(c); err != nil {
		refused = append(refused, "spec.vrrp: "+err.Error())
	}
	rows, errs := status.Compute(c, nodes, services)
	out.VIPs = vips(rows, prev.VIPs, now)
	out.Pools = pools(c.Spec.ServicePools, rows)
	for _, p := range out.Pools {
		out.AddressesInUse += p.InUse
		if out.AddressesFree > math.MaxInt64-p.Free {
			out.AddressesFree = math.MaxInt64
		} else {
			out.AddressesFree += p.Free
		}
	}
	out.SpecDigest = v1alpha1.SpecDigest(name, c.Spec)
	out.Nodes = nodeGenerations(out.SpecDigest, gen, prev.Nodes, nodes)

	var split, none []string
	for _, v := range out.VIPs {
		switch v.State {
		case status.StateSplitBrain:
			split = append(split, v.Address+" ("+v.Holder+")")
		case status.StateNoHolder:
			none = append(none, v.Address)
		}
	}
	var full []string
	for _, p := range out.Pools {
		if p.Free == 0 {
			full = append(full, p.Name)
		}
	}
	var behind []string
	for _, n := range out.Nodes {
		if n.SpecDigest != out.SpecDigest {
			behind = append(behind, n.Name)
		}
	}
	var unreadable []string
	for _, err := range errs {
		unreadable = append(unreadable, err.Error())
	}
	sort.Strings(unreadable)

	switch {
	case len(split) > 0 || len(none) > 0:
		var parts []string
		if len(none) > 0 {
			parts = append(parts, "no holder: "+list(none))
		}
		if len(split) > 0 {
			parts = append(parts, "more than one holder: "+list(split))
		}
		set(&out, gen, now, crd.ConditionReady, false, ReasonNotHeld, strings.Join(parts, "; "))
	case len(behind) > 0:
		set(&out, gen, now, crd.ConditionReady, false, ReasonNodesBehind,
			fmt.Sprintf("not running generation %d (its spec digest): %s", gen, list(behind)))
	default:
		set(&out, gen, now, crd.ConditionReady, true, ReasonAllHeld,
			fmt.Sprintf("%d VIP(s), each with one holder; %d node(s) on generation %d", len(out.VIPs), len(out.Nodes), gen))
	}
	switch {
	case len(split) > 0:
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonSplitBrain, "more than one holder: "+list(split))
	case len(none) > 0:
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonNoHolder, "no holder: "+list(none))
	case len(refused) > 0:
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonInvalidSpec, "vipctl validate refuses it: "+list(refused))
	case len(full) > 0:
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonPoolFull, "no address left in pool(s) "+list(full))
	case len(unreadable) > 0:
		set(&out, gen, now, crd.ConditionDegraded, true, ReasonUnreadable, list(unreadable))
	default:
		set(&out, gen, now, crd.ConditionDegraded, false, ReasonAsExpected, "nothing to look at")
	}
	return out
}

// list joins the first few of items and counts the rest.
func list(items []string) string {
	if len(items) <= maxConditionSubset {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxConditionSubset], ", "), len(items)-maxConditionSubset)
}

func set(s *crd.ClusterVIPsStatus, gen int64, now time.Time, typ string, on bool, reason, msg string) {
	st := metav1.ConditionFalse
	if on {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason,
		Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
}

// vips are the rows of the spec's own VIPs (no Service address). A VIP
// without holder keeps the time it was first seen so in prev.
func vips(rows []status.VIPStatus, prev []crd.VIPStatus, now time.Time) []crd.VIPStatus {
	var out []crd.VIPStatus
	for _, r := range rows {
		if len(r.Services) > 0 || r.Instance == "-" {
			continue
		}
		v := crd.VIPStatus{Address: r.Address, Instance: r.Instance, Holder: strings.Join(r.Holders, ","), State: r.State}
		if r.Since != nil {
			v.Since = ptrTime(r.Since.UTC())
		}
		if len(r.Holders) == 0 {
			v.Since = ptrTime(now)
			if i := slices.IndexFunc(prev, func(p crd.VIPStatus) bool { return p.Address == r.Address }); i >= 0 && prev[i].Holder == "" && prev[i].Since != nil {
				v.Since = prev[i].Since
			}
		}
		out = append(out, v)
	}
	return out
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.Truncate(time.Second))
	return &m
}

// pools counts the addresses of each pool that Services use, and those
// left: the range's size less the instances' anchors and those in use.
func pools(spec []v1alpha1.ServicePool, rows []status.VIPStatus) []crd.PoolStatus {
	var used []netip.Addr
	for _, r := range rows {
		if len(r.Services) > 0 {
			if a, err := netip.ParseAddr(r.Address); err == nil {
				used = append(used, a)
			}
		}
	}
	out := make([]crd.PoolStatus, 0, len(spec))
	for _, p := range spec {
		size := new(big.Int)
		var ranges []v1alpha1.AddressRange
		for _, s := range p.Addresses {
			if r, err := v1alpha1.ParseAddressRange(s); err == nil {
				ranges = append(ranges, r)
				size.Add(size, r.Size())
			}
		}
		var inUse int64
		for _, a := range used {
			if slices.ContainsFunc(ranges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) }) {
				inUse++
			}
		}
		free := size.Sub(size, big.NewInt(int64(len(p.Anchors(true))+len(p.Anchors(false)))+inUse))
		ps := crd.PoolStatus{Name: p.Name, InUse: inUse, Free: math.MaxInt64}
		if free.IsInt64() {
			ps.Free = max(free.Int64(), 0)
		} else if free.Sign() < 0 {
			ps.Free = 0
		}
		out = append(out, ps)
	}
	return out
}

// nodeGenerations lists every node that runs a vipctl sidecar (it
// publishes what it holds or what it applied) with the digest of what
// it runs and the last generation it was seen running: gen when its
// digest is the spec's, else what prev said.
func nodeGenerations(digest string, gen int64, prev []crd.NodeStatus, nodes []corev1.Node) []crd.NodeStatus {
	var out []crd.NodeStatus
	for _, n := range nodes {
		value, hasConfig := n.Annotations[v1alpha1.AnnotationNodeConfig]
		applied := v1alpha1.ParseAppliedConfig(value)
		_, hasVIPs := n.Annotations[v1alpha1.AnnotationNodeVIPs]
		if !hasConfig && !hasVIPs {
			continue
		}
		ns := crd.NodeStatus{Name: n.Name, SpecDigest: applied.Digest, Source: applied.Source}
		if i := slices.IndexFunc(prev, func(p crd.NodeStatus) bool { return p.Name == n.Name }); i >= 0 {
			ns.ObservedGeneration = prev[i].ObservedGeneration
		}
		if hasConfig && applied.Digest == digest {
			ns.ObservedGeneration = gen
		}
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
