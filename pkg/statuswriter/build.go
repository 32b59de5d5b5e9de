// Package statuswriter keeps the status of the ClusterVIPs objects true:
// who holds each VIP of the spec and since when, how full each Service
// pool is, which generation of the spec each node runs, and the Ready and
// Degraded conditions. The allocator's leader runs it (one writer per
// cluster); what it reads is what `vipctl status` reads: the nodes'
// vipctl.io/vips and vipctl.io/config annotations and the Services'
// load-balancer addresses, and the nodes' own addresses, which no VIP or
// pool address may be (and which it hands the allocator).
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
	"github.com/vipctl/vipctl/pkg/cluster"
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
	ReasonUnreachable  = "NodesUnreachable"
	maxConditionSubset = 5
)

// Build computes the status of the object named name at generation gen
// with spec, from the nodes and Services, keeping what prev says where
// nothing changed (since when a VIP has had no holder, the last
// generation a node was seen running, the conditions' transition times).
// reach tells an isolated holder from a split brain, as `vipctl status`
// does (the kubelets' Leases; the zero Reach tells nothing).
func Build(name string, gen int64, spec v1alpha1.ClusterVIPsSpec, prev crd.ClusterVIPsStatus, nodes []corev1.Node, services []corev1.Service, reach status.Reach, now time.Time) crd.ClusterVIPsStatus {
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
	for _, e := range v1alpha1.ValidateNodes(c, nodeAddresses(nodes)) {
		refused = append(refused, e.Error())
	}
	if _, err := vrid.ForCluster(c); err != nil {
		refused = append(refused, "spec.vrrp: "+err.Error())
	}
	rows, errs := status.Compute(c, nodes, services)
	rep := status.Report{VIPs: rows}
	rep.Classify(reach, now)
	rows = rep.VIPs
	out.VIPs = vips(rows, prev.VIPs, now)
	out.Pools = pools(cluster.CompilePools(c.Spec.ServicePools), rows)
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

	f := findings{refused: refused, unreadable: errs}
	f.collect(out, rows)
	f.setConditions(&out, gen, now)
	return out
}

// nodeAddresses are the Nodes' own addresses, which no VIP or pool
// address may be (what `vipctl validate --nodes` checks). A Node
// without an InternalIP or ExternalIP has none to check.
func nodeAddresses(nodes []corev1.Node) []v1alpha1.NodeAddresses {
	var list []cluster.Node
	for i := range nodes {
		if n, err := cluster.NodeFromKubernetes(&nodes[i], ""); err == nil {
			list = append(list, n)
		}
	}
	return cluster.Addresses(list)
}

// findings are what the conditions report.
type findings struct {
	split, none, away, full, behind, refused []string
	unreadable                               []error
}

// collect gathers the findings of a computed status and its rows.
func (f *findings) collect(out crd.ClusterVIPsStatus, rows []status.VIPStatus) {
	for _, v := range out.VIPs {
		switch v.State {
		case status.StateSplitBrain:
			f.split = append(f.split, v.Address+" ("+v.Holder+")")
		case status.StateNoHolder:
			f.none = append(f.none, v.Address)
		}
	}
	for _, r := range rows {
		for _, n := range r.Unreachable {
			if !slices.Contains(f.away, n) {
				f.away = append(f.away, n)
			}
		}
	}
	sort.Strings(f.away)
	for _, p := range out.Pools {
		if p.Free == 0 {
			f.full = append(f.full, p.Name)
		}
	}
	for _, n := range out.Nodes {
		if n.SpecDigest != out.SpecDigest {
			f.behind = append(f.behind, n.Name)
		}
	}
}

// setConditions sets Ready and Degraded from the findings, the most
// pressing reason first.
func (f findings) setConditions(out *crd.ClusterVIPsStatus, gen int64, now time.Time) {
	var unreadable []string
	for _, err := range f.unreadable {
		unreadable = append(unreadable, err.Error())
	}
	sort.Strings(unreadable)
	switch {
	case len(f.split) > 0 || len(f.none) > 0:
		var parts []string
		if len(f.none) > 0 {
			parts = append(parts, "no holder: "+list(f.none))
		}
		if len(f.split) > 0 {
			parts = append(parts, "more than one holder: "+list(f.split))
		}
		set(out, gen, now, crd.ConditionReady, false, ReasonNotHeld, strings.Join(parts, "; "))
	case len(f.behind) > 0:
		set(out, gen, now, crd.ConditionReady, false, ReasonNodesBehind,
			fmt.Sprintf("not running generation %d (its spec digest): %s", gen, list(f.behind)))
	default:
		set(out, gen, now, crd.ConditionReady, true, ReasonAllHeld,
			fmt.Sprintf("%d VIP(s), each with one holder; %d node(s) on generation %d", len(out.VIPs), len(out.Nodes), gen))
	}
	switch {
	case len(f.split) > 0:
		set(out, gen, now, crd.ConditionDegraded, true, ReasonSplitBrain, "more than one holder: "+list(f.split))
	case len(f.refused) > 0:
		// The cause before what it likely brings: a sidecar that cannot
		// give a VIP a VRRP ID keeps its last good config, and a VIP
		// that is a node's own address conflicts on the wire with that
		// node, so its VIPs may have no holder because of it.
		set(out, gen, now, crd.ConditionDegraded, true, ReasonInvalidSpec, "vipctl validate refuses it: "+list(f.refused))
	case len(f.none) > 0:
		set(out, gen, now, crd.ConditionDegraded, true, ReasonNoHolder, "no holder: "+list(f.none))
	case len(f.away) > 0:
		set(out, gen, now, crd.ConditionDegraded, true, ReasonUnreachable,
			"node(s) not reaching the API, whose claims on VIPs are from before: "+list(f.away))
	case len(f.full) > 0:
		set(out, gen, now, crd.ConditionDegraded, true, ReasonPoolFull, "no address left in pool(s) "+list(f.full))
	case len(unreadable) > 0:
		set(out, gen, now, crd.ConditionDegraded, true, ReasonUnreadable, list(unreadable))
	default:
		set(out, gen, now, crd.ConditionDegraded, false, ReasonAsExpected, "nothing to look at")
	}
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
		// An isolated VIP's holder is the one claimant that still
		// reaches the API; the others' claims are from before.
		holders := slices.DeleteFunc(slices.Clone(r.Holders), func(h string) bool { return slices.Contains(r.Unreachable, h) })
		v := crd.VIPStatus{Address: r.Address, Instance: r.Instance, Holder: strings.Join(holders, ","), State: r.State}
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

// pools counts the addresses of each pool that Services use (the pool
// that owns each, cluster.Pools.Of), and those left: the pool's
// assignable addresses less those in use.
func pools(compiled cluster.Pools, rows []status.VIPStatus) []crd.PoolStatus {
	inUse := map[*cluster.Pool]int64{}
	for _, r := range rows {
		if len(r.Services) == 0 {
			continue
		}
		if a, err := netip.ParseAddr(r.Address); err == nil {
			if p := compiled.Of(a); p != nil {
				inUse[p]++
			}
		}
	}
	out := make([]crd.PoolStatus, 0, len(compiled))
	for _, p := range compiled {
		free := new(big.Int).Sub(p.Assignable(), big.NewInt(inUse[p]))
		ps := crd.PoolStatus{Name: p.Name, InUse: inUse[p], Free: math.MaxInt64}
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
