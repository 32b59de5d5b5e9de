// Package update computes and applies day-2 edits of service pools: the
// plan of what changes against the live cluster (pools, node bindings,
// VRRP IDs, Services whose addresses would be orphaned), and the writes
// that carry it out (the ConfigMap with optimistic concurrency, released
// Service addresses, MachineConfigs when static parts changed).
package update

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// PoolChange is one pool's difference between the live config and the
// desired one.
type PoolChange struct {
	Name string `json:"name"`
	// Change is added, removed or changed.
	Change string `json:"change"`
	// Fields lists each field of the pool that changed, by its path in
	// the file, and how: "spec.servicePools[1].addresses: old -> new".
	Fields []string `json:"fields,omitempty"`
	// IDs are the VRRP IDs of the pool's instances in the desired config
	// (none for a bgp pool).
	IDs map[v1alpha1.InstanceKey]uint8 `json:"ids,omitempty"`
	// Taken are the IDs of instances the pool gains (a new pool, a move
	// from bgp to vrrp, more instances); Freed the live IDs of instances
	// it loses (a removed pool, a move from vrrp to bgp, fewer
	// instances), which other clusters on the LAN may then use.
	Taken map[v1alpha1.InstanceKey]uint8 `json:"takenIDs,omitempty"`
	Freed map[v1alpha1.InstanceKey]uint8 `json:"freedIDs,omitempty"`
}

// Orphan is a Service holding addresses that no desired pool contains (or
// that became an instance's anchor), or naming external IPs that no
// desired pool would announce any more.
type Orphan struct {
	Service   string   `json:"service"`
	Addresses []string `json:"addresses"`
	// Reason says why the addresses go (ReasonNoPool, or the anchor's
	// pool).
	Reason string `json:"reason"`
	// ExternalIP says the addresses are external IPs the Service names
	// (spec.externalIPs, its owner's to change): --force leaves the
	// Service as it is and only says, in an Event, that they are no
	// longer announced.
	ExternalIP bool `json:"externalIP,omitempty"`
}

// ReasonNoPool is an Orphan's reason when no desired pool holds its
// addresses.
const ReasonNoPool = "no pool contains it"

// anchorReason is an Orphan's reason when its addresses became anchors
// of a vrrp pool (a pool moved from bgp to vrrp, or reshaped so that its
// last addresses moved).
func anchorReason(pool string) string {
	return "it becomes a VRRP anchor of pool " + pool + ", which no Service may hold"
}

// Plan is what `vipctl update` would do.
type Plan struct {
	// Create is true when the ConfigMap does not exist yet.
	Create bool         `json:"create"`
	Pools  []PoolChange `json:"pools,omitempty"`
	// Orphans would lose their addresses.
	Orphans []Orphan `json:"orphans,omitempty"`
	// Static lists changes outside the day-2 parts: they need new
	// MachineConfigs, and the Machine Config Operator reboots the nodes.
	Static []string `json:"static,omitempty"`
	// Objects are the other objects of manifests/vipctl.yaml that the
	// cluster lacks or has otherwise than `vipctl render` would write
	// them for Desired (the allocator's image, RBAC); Apply brings them in
	// line server-side.
	Objects []ObjectChange `json:"objects,omitempty"`
	// Bootstrap says how spec.bootstrap changes, if it does: a day-2 part,
	// since only the sidecars' renders name the bootstrap host.
	Bootstrap string `json:"bootstrap,omitempty"`
	// VRRP lists the VRRP IDs that move and a changed
	// spec.vrrp.avoidVirtualRouterIDs, by field path: day-2 parts too
	// (vrrpDiff).
	VRRP []string `json:"vrrp,omitempty"`
	// Class says how spec.loadBalancerClass changes, if it does: a day-2
	// part, read by the allocator and the sidecars from the ConfigMap.
	Class string `json:"loadBalancerClass,omitempty"`
	// Warnings are things the plan does that are allowed but unwise.
	Warnings []string `json:"warnings,omitempty"`
	// Release is set when the plan writes MachineConfigs that the
	// cluster's Machine Config Operator would refuse (its release is
	// older than spec.openshiftRelease): Apply refuses the plan unless
	// forced.
	Release *ReleaseFinding `json:"release,omitempty"`
	// Desired is the config that would be written, with every pool
	// instance's VRRP ID pinned so later edits never renumber it.
	Desired *v1alpha1.ClusterVIPs `json:"-"`
	// BootstrapNodes are the Nodes the rewritten MachineConfigs ship the
	// bootstrap node list from (`vipctl update --nodes`); nil ships the
	// live cluster's. Without one, a node installed or wiped after
	// the update starts keepalived without instances and its API VIP
	// waits for the API.
	BootstrapNodes []corev1.Node `json:"-"`
	// Object is the ClusterVIPs object that is the live config of a
	// migrated cluster (Source.Object): the plan was computed against
	// it, Apply writes it first and the ConfigMap as its copy.
	Object *unstructured.Unstructured `json:"-"`
}

// Empty tells whether nothing would change.
func (p *Plan) Empty() bool {
	return !p.configChanges() && len(p.Objects) == 0
}

// configChanges tells whether the ConfigMap is written: anything but the
// other objects changes.
func (p *Plan) configChanges() bool {
	return p.Create || len(p.Pools) > 0 || len(p.Static) > 0 || len(p.Orphans) > 0 || p.Bootstrap != "" || len(p.VRRP) > 0 || p.Class != ""
}

// Compute plans the move from live (nil: no ConfigMap yet) to desired,
// given the cluster's Services. desired must be valid; the returned
// Desired is a copy with the pool instances' VRRP IDs pinned: existing
// pools keep the IDs they have live, new ones get the next free IDs
// (checked against every ID the cluster uses).
func Compute(live, desired *v1alpha1.ClusterVIPs, services []corev1.Service) (*Plan, error) {
	p := &Plan{Create: live == nil}
	out, err := pinIDs(live, desired)
	if err != nil {
		return nil, err
	}
	p.Desired = out
	ids, err := vrid.ForCluster(out)
	if err != nil {
		return nil, fmt.Errorf("VRRP IDs: %w", err)
	}
	var liveIDs map[v1alpha1.InstanceKey]uint8
	livePools := map[string]v1alpha1.ServicePool{}
	if live != nil {
		if liveIDs, err = vrid.ForCluster(live); err != nil {
			return nil, fmt.Errorf("the live config's VRRP IDs: %w", err)
		}
		for _, lp := range live.Spec.ServicePools {
			livePools[lp.Name] = lp
		}
	}
	for i, dp := range out.Spec.ServicePools {
		lp, existed := livePools[dp.Name]
		delete(livePools, dp.Name)
		pc := PoolChange{Name: dp.Name, IDs: poolIDs(out, ids, dp.Name)}
		pc.Taken, pc.Freed = idDiff(poolIDs(live, liveIDs, dp.Name), pc.IDs)
		if !existed {
			pc.Change = "added"
			p.Pools = append(p.Pools, pc)
			continue
		}
		pc.Fields = poolDiff(i, lp, dp)
		if len(pc.Fields) > 0 || len(pc.Taken) > 0 || len(pc.Freed) > 0 {
			pc.Change = "changed"
			p.Pools = append(p.Pools, pc)
		}
	}
	removed := make([]string, 0, len(livePools))
	for name := range livePools {
		removed = append(removed, name)
	}
	sort.Strings(removed)
	for _, name := range removed {
		p.Pools = append(p.Pools, PoolChange{Name: name, Change: "removed", Freed: poolIDs(live, liveIDs, name)})
	}
	p.Orphans = orphans(out, services)
	if live != nil {
		p.Orphans = append(p.Orphans, lostExternalIPs(live, out, services)...)
		if before, after := cluster.ClassOf(live), cluster.ClassOf(out); before != after {
			p.Class = before.Describe() + " -> " + after.Describe()
			p.Orphans = append(p.Orphans, unservedByClass(before, after, services)...)
		}
		p.Bootstrap = bootstrapDiff(live.Spec.Bootstrap, out.Spec.Bootstrap)
		p.VRRP = vrrpDiff(live, out, liveIDs, ids)
		p.Static = staticDiff(live, out)
		p.Warnings = bgpBeforeRollout(live, out, p.Static)
	}
	return p, nil
}

// bgpBeforeRollout warns about pools that become bgp in the same update
// that changes spec.bgp: the sidecars take the pools from the ConfigMap
// at once but spec.bgp only from their node's file, which the Machine
// Config Operator rewrites node by node.
func bgpBeforeRollout(live, desired *v1alpha1.ClusterVIPs, static []string) []string {
	if !slices.Contains(static, "spec.bgp") {
		return nil
	}
	wasBGP := map[string]bool{}
	for _, lp := range live.Spec.ServicePools {
		wasBGP[lp.Name] = lp.IsBGP()
	}
	var out []string
	for _, dp := range desired.Spec.ServicePools {
		if dp.IsBGP() && !wasBGP[dp.Name] {
			out = append(out, fmt.Sprintf("pool %s becomes bgp while spec.bgp changes: a node takes the pool at once but spec.bgp only when the Machine Config Operator has rolled it, and until then refuses the new pools and keeps its last valid ones (vipctl_runtimecfg_config_invalid 1); roll spec.bgp out first, then move the pool (docs/bgp.md)", dp.Name))
		}
	}
	return out
}

// poolIDs are the VRRP IDs of pool's instances in c (nil: none), from
// ids, c's IDs. A bgp pool has none: c.InstanceKeys skips it.
func poolIDs(c *v1alpha1.ClusterVIPs, ids map[v1alpha1.InstanceKey]uint8, pool string) map[v1alpha1.InstanceKey]uint8 {
	out := map[v1alpha1.InstanceKey]uint8{}
	if c == nil {
		return out
	}
	for _, k := range c.InstanceKeys() {
		if name, _, ok := k.Pool(); ok && name == pool {
			out[k] = ids[k]
		}
	}
	return out
}

// idDiff splits a pool's IDs into those only desired has (taken) and
// those only live has (freed); nil when there are none.
func idDiff(live, desired map[v1alpha1.InstanceKey]uint8) (taken, freed map[v1alpha1.InstanceKey]uint8) {
	only := func(a, b map[v1alpha1.InstanceKey]uint8) map[v1alpha1.InstanceKey]uint8 {
		var out map[v1alpha1.InstanceKey]uint8
		for k, id := range a {
			if _, ok := b[k]; !ok {
				if out == nil {
					out = map[v1alpha1.InstanceKey]uint8{}
				}
				out[k] = id
			}
		}
		return out
	}
	return only(desired, live), only(live, desired)
}

// pinIDs copies desired and pins every pool instance's VRRP ID: the live
// config's ID for an instance that exists there, a fresh one otherwise.
func pinIDs(live, desired *v1alpha1.ClusterVIPs) (*v1alpha1.ClusterVIPs, error) {
	out := *desired
	out.Spec.VRRP.VirtualRouterIDs = map[string]int{}
	for k, v := range desired.Spec.VRRP.VirtualRouterIDs {
		out.Spec.VRRP.VirtualRouterIDs[k] = v
	}
	// The desired VRRP instances of the pools: a bgp pool has none.
	poolKeys := map[v1alpha1.InstanceKey]bool{}
	for _, k := range desired.InstanceKeys() {
		if _, _, isPool := k.Pool(); isPool {
			poolKeys[k] = true
		}
	}
	// Pins of instances that are gone go with them: a removed pool's, a
	// pool's moved to bgp, instances beyond a lowered count.
	for k := range out.Spec.VRRP.VirtualRouterIDs {
		if _, _, isPool := v1alpha1.InstanceKey(k).Pool(); isPool && !poolKeys[v1alpha1.InstanceKey(k)] {
			delete(out.Spec.VRRP.VirtualRouterIDs, k)
		}
	}
	if live != nil {
		liveIDs, err := vrid.ForCluster(live)
		if err != nil {
			return nil, fmt.Errorf("the live config's VRRP IDs: %w", err)
		}
		for k := range poolKeys {
			if id, ok := liveIDs[k]; ok {
				if _, pinned := out.Spec.VRRP.VirtualRouterIDs[k.String()]; !pinned {
					out.Spec.VRRP.VirtualRouterIDs[k.String()] = int(id)
				}
			}
		}
	}
	ids, err := vrid.ForCluster(&out)
	if err != nil {
		return nil, fmt.Errorf("VRRP IDs: %w", err)
	}
	for k := range poolKeys {
		out.Spec.VRRP.VirtualRouterIDs[k.String()] = int(ids[k])
	}
	// What validate and render refuse in a file, update refuses in the
	// edit it writes (the nodes are not known here).
	errs := v1alpha1.Validate(&out)
	if len(errs) == 0 {
		errs = v1alpha1.ValidateNodes(&out, nil)
	}
	if len(errs) > 0 {
		return nil, &v1alpha1.ValidationError{Errors: errs}
	}
	return &out, nil
}

// bootstrapDiff says how the bootstrap host changes ("" when it does not).
func bootstrapDiff(live, desired *v1alpha1.BootstrapSpec) string {
	switch {
	case reflect.DeepEqual(live, desired):
		return ""
	case desired == nil:
		return fmt.Sprintf("removed: the control-plane nodes stop accepting VRRP adverts from %s", strings.Join(live.Addresses, ", "))
	case live == nil:
		return fmt.Sprintf("added: the control-plane nodes accept VRRP adverts for the API VIP from %s", strings.Join(desired.Addresses, ", "))
	default:
		return fmt.Sprintf("%s -> %s", strings.Join(live.Addresses, ", "), strings.Join(desired.Addresses, ", "))
	}
}

// staticDiff lists the top-level differences outside the day-2 parts.
func staticDiff(live, desired *v1alpha1.ClusterVIPs) []string {
	// Labels and annotations stay in the file (Shipped): editing them
	// changes nothing on the nodes.
	a, b := *live.Shipped(), *desired.Shipped()
	a.Spec.ServicePools, b.Spec.ServicePools = nil, nil
	a.Spec.Bootstrap, b.Spec.Bootstrap = nil, nil
	a.Spec.LoadBalancerClass, b.Spec.LoadBalancerClass = nil, nil
	a.Spec.VRRP.VirtualRouterIDs, b.Spec.VRRP.VirtualRouterIDs = nil, nil
	a.Spec.VRRP.AvoidVirtualRouterIDs, b.Spec.VRRP.AvoidVirtualRouterIDs = nil, nil
	var out []string
	if !reflect.DeepEqual(a.Metadata, b.Metadata) {
		out = append(out, "metadata")
	}
	at, bt := reflect.ValueOf(a.Spec), reflect.ValueOf(b.Spec)
	for i := 0; i < at.NumField(); i++ {
		if !reflect.DeepEqual(at.Field(i).Interface(), bt.Field(i).Interface()) {
			out = append(out, "spec."+jsonName(at.Type().Field(i)))
		}
	}
	return out
}

// orphans lists the served Services whose status addresses fall outside
// every desired pool, or on a pool instance's anchor.
func orphans(c *v1alpha1.ClusterVIPs, services []corev1.Service) []Orphan {
	m := cluster.Compile(c)
	var out []Orphan
	for i := range services {
		s := &services[i]
		if !m.Class.Serves(s) {
			continue
		}
		lost := map[string][]string{} // by reason
		var reasons []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(in.IP)
			if err != nil {
				continue
			}
			a = a.Unmap()
			reason := ""
			switch p := m.PoolOf(a); {
			case p == nil:
				reason = ReasonNoPool
			case p.IsAnchor(a):
				reason = anchorReason(p.Name)
			default:
				continue
			}
			if _, seen := lost[reason]; !seen {
				reasons = append(reasons, reason)
			}
			lost[reason] = append(lost[reason], a.String())
		}
		for _, r := range reasons {
			out = append(out, Orphan{Service: s.Namespace + "/" + s.Name, Addresses: lost[r], Reason: r})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}

// unservedByClass lists the Services with a status address that the
// class before has vipctl serve and the class after does not (another
// class name, or only: true and no class on the Service): the allocator
// releases their addresses once the ConfigMap changes, and another
// implementation, if any, gives them new ones.
func unservedByClass(before, after cluster.Class, services []corev1.Service) []Orphan {
	var orphans []Orphan
	for i := range services {
		s := &services[i]
		if !before.Serves(s) || after.Serves(s) || len(s.Status.LoadBalancer.Ingress) == 0 {
			continue
		}
		var addrs []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addrs = append(addrs, in.IP)
			}
		}
		orphans = append(orphans, Orphan{Service: s.Namespace + "/" + s.Name, Addresses: addrs,
			Reason: "spec.loadBalancerClass: vipctl no longer serves it (" + after.Describe() + ")"})
	}
	sort.SliceStable(orphans, func(i, j int) bool { return orphans[i].Service < orphans[j].Service })
	return orphans
}

// Text renders the plan for people, diff-like.
func (p *Plan) Text() string {
	var b strings.Builder
	if p.Create {
		b.WriteString("+ ConfigMap vipctl-system/vipctl-config (new)\n")
	}
	for _, pc := range p.Pools {
		switch pc.Change {
		case "added":
			fmt.Fprintf(&b, "+ pool %s", pc.Name)
		case "removed":
			fmt.Fprintf(&b, "- pool %s", pc.Name)
		default:
			fmt.Fprintf(&b, "~ pool %s", pc.Name)
		}
		switch {
		case pc.Change == "added" && len(pc.IDs) > 0:
			fmt.Fprintf(&b, " (VRRP IDs %s)", idList(pc.IDs))
		case len(pc.Taken) > 0 && len(pc.Freed) > 0:
			fmt.Fprintf(&b, " (takes VRRP IDs %s; frees %s)", idList(pc.Taken), idList(pc.Freed))
		case len(pc.Taken) > 0:
			fmt.Fprintf(&b, " (takes VRRP IDs %s)", idList(pc.Taken))
		case len(pc.Freed) > 0:
			fmt.Fprintf(&b, " (frees VRRP IDs %s)", idList(pc.Freed))
		}
		b.WriteString("\n")
		for _, f := range pc.Fields {
			fmt.Fprintf(&b, "    %s\n", f)
		}
	}
	if p.Class != "" {
		fmt.Fprintf(&b, "~ spec.loadBalancerClass %s\n", p.Class)
	}
	if p.Bootstrap != "" {
		fmt.Fprintf(&b, "~ spec.bootstrap %s\n", p.Bootstrap)
	}
	for _, v := range p.VRRP {
		fmt.Fprintf(&b, "~ %s\n", v)
	}
	for _, o := range p.Objects {
		if o.Change == "added" {
			fmt.Fprintf(&b, "+ %s (new)\n", o)
			continue
		}
		fmt.Fprintf(&b, "~ %s\n", o)
		for _, f := range o.Fields {
			fmt.Fprintf(&b, "    %s\n", f)
		}
	}
	for _, o := range p.Orphans {
		fmt.Fprintf(&b, "! Service %s would lose %s (%s)\n", o.Service, strings.Join(o.Addresses, ", "), o.Reason)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "! %s\n", w)
	}
	if p.Release != nil {
		fmt.Fprintf(&b, "! %s: refused unless --force", p.Release.Message)
		if p.Release.Fix != "" {
			fmt.Fprintf(&b, " (or %s)", p.Release.Fix)
		}
		b.WriteString("\n")
	}
	if len(p.Static) > 0 {
		fmt.Fprintf(&b, "! static parts change (%s): new MachineConfigs; the Machine Config Operator will roll (reboot) the nodes\n", strings.Join(p.Static, ", "))
	} else if !p.Empty() {
		b.WriteString("no MachineConfig change: no node reboots\n")
	}
	if p.Empty() {
		b.WriteString("no change\n")
	}
	return b.String()
}

// idList writes IDs as key=id, in key order.
func idList(ids map[v1alpha1.InstanceKey]uint8) string {
	keys := make([]v1alpha1.InstanceKey, 0, len(ids))
	for k := range ids {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, ids[k]))
	}
	return strings.Join(parts, ", ")
}
