package render

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// instance is one VRRP instance of the cluster, before it is seen from a
// particular node.
type instance struct {
	key    v1alpha1.InstanceKey
	family int
	vrid   uint8
	vips   []netip.Addr
	// excluded are addresses held with the instance but left out of its
	// adverts (a pool's Service addresses).
	excluded []netip.Addr
	// sidecar says the excluded addresses are the sidecar's to add while
	// this node holds vips (the anchor), not keepalived's (announce: sidecar).
	sidecar bool
	// ranges are the sidecar-announced pool's ranges of this family.
	ranges []v1alpha1.AddressRange
	// network is the machine network VRRP speaks in; a routed instance
	// (spec.api.routed) has none: each member speaks from its own
	// address in any machine network, across routers.
	network  netip.Prefix
	routed   bool
	eligible []member
	scripts  []string
	files    []string
	why      string
	// on is where the VIPs live when not on the VRRP interface.
	on v1alpha1.VIPInterface
}

type member struct {
	node     *cluster.Node
	src      netip.Addr
	priority int
	// excluded members of Service instances sit at excludedPriority and
	// are never steered to.
	excluded bool
}

// Plan is the cluster-wide part of rendering, computed once per (config,
// state) and then asked for each node's files: with 2000 nodes the
// eligibility of every node for every instance is worked out only once.
type Plan struct {
	c         *v1alpha1.ClusterVIPs
	model     *cluster.Model
	ids       map[v1alpha1.InstanceKey]uint8
	state     cluster.State
	instances []*instance
	byNode    map[string][]*instance
	nodes     map[string]*cluster.Node
	scripts   []keepalived.Script
	tracks    []keepalived.TrackFile
	unplaced  []string
	missing   []onnode.MissingInterface
	// root prefixes the node paths the configs name; "" on a real node.
	root string
	// skipLonely leaves out instances without a peer instead of failing.
	skipLonely bool
	// heldBack is a node rendered at the lowest priority everywhere.
	heldBack string
	// drained is a node `vipctl drain` drained: its BGP announcements
	// are all backups (Announced).
	drained string
	// proxyPending are the Local Services whose ready endpoints on node
	// proxyNode its service proxy does not deliver to yet: that node
	// announces none of their bgp routes (WithProxyPending).
	proxyNode    string
	proxyPending map[string]bool
	// bootstrap is the bootstrap host (spec.bootstrap), rendered as the
	// node BootstrapNode; nil without one.
	bootstrap *cluster.Node
}

// BootstrapNode is the name the plan gives the bootstrap host
// (spec.bootstrap): Plan.Node(BootstrapNode) renders what `vipctl
// bootstrap` runs. No Kubernetes Node can be called that (an underscore).
const BootstrapNode = "vipctl_bootstrap"

// PlanOption adjusts a Plan.
type PlanOption func(*Plan)

// WithRoot makes the configs name every node path (check script, track
// files, sockets) under root. The network-namespace lab runs several
// "nodes" on one filesystem; on a real node root is empty.
func WithRoot(root string) PlanOption {
	return func(p *Plan) { p.root = root }
}

// WithLonelySkipped makes a node's render leave out an instance that has
// no unicast peer (one eligible node) instead of failing: the sidecar must
// keep every other instance current when, say, a pool's second node is
// gone. `vipctl render` keeps refusing such a plan. NodeRender.Lonely
// lists them.
func WithLonelySkipped() PlanOption {
	return func(p *Plan) { p.skipLonely = true }
}

// WithHeldBack renders node at the lowest priority (1) in every instance,
// as if drained: a node that has not synced with the cluster yet never
// preempts a peer that has (docs/operations.md, the rules up top), yet
// holds a VIP no peer holds, as in a whole-cluster cold start. Its
// sidecar's first sync renders it without this, and it preempts then,
// make-before-break.
func WithHeldBack(node string) PlanOption {
	return func(p *Plan) { p.heldBack = node }
}

// WithProxyPending leaves out node's bgp routes of the named Local
// Services (namespace/name), not even backups: the EndpointSlices say a
// ready endpoint runs there, but the node's service proxy counts none yet
// (docs/runtimecfg.md), and a router sending it the Service's traffic now
// would have it dropped. As a backup it would share the traffic with the
// backup of a node whose pod drains but still serves (equal AS paths):
// the cluster lab's router did. Their VRRP instances wait by their status
// files (runtimecfg), not here.
func WithProxyPending(node string, services map[string]bool) PlanOption {
	return func(p *Plan) { p.proxyNode, p.proxyPending = node, services }
}

// WithDrained renders node as drained (`vipctl drain`, the Node's
// cluster.DrainAnnotation): every address it announces over BGP becomes
// a backup route, which the routers use only while no other node
// announces the address plainly. Its VRRP instances drain by the drain
// file instead, which needs no render.
func WithDrained(node string) PlanOption {
	return func(p *Plan) { p.drained = node }
}

// NewPlan computes every VRRP instance of a compiled config and which
// nodes take part in it. ids maps instance keys to VRRP IDs (vrid.Assign's result).
func NewPlan(m *cluster.Model, ids map[v1alpha1.InstanceKey]uint8, st cluster.State, opts ...PlanOption) (*Plan, error) {
	c := m.Config
	p := &Plan{c: c, model: m, ids: ids, state: st, byNode: map[string][]*instance{}, nodes: map[string]*cluster.Node{}}
	for _, o := range opts {
		o(p)
	}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if _, dup := p.nodes[n.Name]; dup {
			return nil, fmt.Errorf("node %s listed twice", n.Name)
		}
		p.nodes[n.Name] = n
	}
	s := &c.Spec
	fall, rise := 2, 2
	if s.VRRP.Profile == v1alpha1.ProfileFast {
		fall = 1
	}
	p.tracks = append(p.tracks, keepalived.TrackFile{Name: drainTrackName, Path: p.root + onnode.DrainFile, Weight: drainWeight,
		Why: "planned handover: the sidecar writes 1 here to give the VIPs away before stopping"})

	// In mode poolsOnly OpenShift's own keepalived and haproxy carry the
	// API VIP (and the ingress VIP: spec.ingress is empty then).
	if err := p.addAPI(fall, rise); err != nil {
		return nil, err
	}
	if err := p.addBootstrap(); err != nil {
		return nil, err
	}
	for i, in := range s.Ingress {
		if err := p.addIngress(i, in, fall, rise); err != nil {
			return nil, err
		}
	}
	for _, pool := range p.model.Pools {
		if pool.IsBGP() {
			continue // announced by FRR (bgp.go), no VRRP instance
		}
		if err := p.addPool(pool); err != nil {
			return nil, err
		}
	}
	for _, ls := range p.model.VRRPLocalServices(st) {
		if err := p.addLocal(ls); err != nil {
			return nil, err
		}
	}
	for _, inst := range p.byNode[p.heldBack] {
		for i := range inst.eligible {
			if inst.eligible[i].node.Name == p.heldBack {
				inst.eligible[i].priority = excludedPriority
			}
		}
	}
	return p, nil
}

// routerCandidates are the nodes that take part in an IngressController's
// instance: where its routers are scheduled, once they are known on two
// nodes or more (State.RouterNodes); before that (no API yet, `vipctl
// render`) every node its routers may run on (spec.ingress[].nodeSelector,
// every node without one), and the track file decides which may hold it.
// Without a selector the instance has every node of the cluster: 5000
// unicast peers in each node's keepalived.conf at 5000 nodes.
func routerCandidates(in v1alpha1.IngressSpec, st cluster.State) func(*cluster.Node) bool {
	if placed, known := st.RouterNodes[in.Name]; known {
		on := map[string]bool{}
		for _, n := range placed {
			on[n] = true
		}
		return func(n *cluster.Node) bool { return on[n.Name] }
	}
	return func(n *cluster.Node) bool { return cluster.Matches(in.NodeSelector, n.Labels) }
}

// routerWhy says who may hold an IngressController's VIPs, in keepalived.conf
// and in the message for an instance no node can hold.
func routerWhy(i int, in v1alpha1.IngressSpec) string {
	why := "held by a node running a ready router of IngressController " + in.Name
	if len(in.NodeSelector) > 0 {
		keys := slices.Sorted(maps.Keys(in.NodeSelector))
		pairs := make([]string, len(keys))
		for j, k := range keys {
			pairs[j] = fmt.Sprintf("%s: %q", k, in.NodeSelector[k])
		}
		why += fmt.Sprintf(" on a node matching spec.ingress[%d].nodeSelector {%s}", i, strings.Join(pairs, ", "))
	}
	return why
}

// addBootstrap makes the bootstrap host a member of the API instances
// (api-int's own too: the control-plane machines fetch their first
// Ignition there), at
// BootstrapPriority: above every control-plane node, so that none of them
// takes the VIP from it until it yields (its drain file, as a node's
// drain), and they take it from it make-before-break. Every node lists it
// as a unicast peer; the bootstrap host's own files come from the same
// plan (Node(BootstrapNode)).
func (p *Plan) addBootstrap() error {
	b := p.c.Spec.Bootstrap
	if b == nil {
		return nil
	}
	if _, dup := p.nodes[BootstrapNode]; dup {
		return fmt.Errorf("node %s: the name is the bootstrap host's (spec.bootstrap)", BootstrapNode)
	}
	host := &cluster.Node{Name: BootstrapNode, ControlPlane: true}
	host.Addresses = slices.Clone(p.model.Bootstrap)
	if p.c.Spec.API.Routed {
		// Its BGP peers are those that select these (frrView).
		host.Labels = b.BootstrapLabels()
	}
	if p.state.Bootstrap != nil {
		host.Interface = p.state.Bootstrap.Interface
	}
	p.bootstrap = host
	p.nodes[BootstrapNode] = host
	for _, inst := range p.instances {
		if inst.key != v1alpha1.KeyAPI && inst.key != v1alpha1.KeyAPIInternal {
			continue
		}
		src, ok := p.sourceOf(host, inst)
		if !ok {
			continue // validation keeps this from happening
		}
		inst.eligible = append(inst.eligible, member{node: host, src: src, priority: BootstrapPriority})
		sort.SliceStable(inst.eligible, func(i, j int) bool { return inst.eligible[i].node.Name < inst.eligible[j].node.Name })
		p.byNode[BootstrapNode] = append(p.byNode[BootstrapNode], inst)
	}
	return nil
}

// isBootstrap tells whether node is the bootstrap host.
func (p *Plan) isBootstrap(node string) bool { return p.bootstrap != nil && node == BootstrapNode }

// addLocal gives a Local Service its own instance. Its members are the
// pool's nodes with a ready endpoint, those whose endpoint is stopping
// gracefully (Draining) or not ready (Unready, unless the pool caps its
// holders below all of them: ready nodes must not lose their place to
// them), plus, when fewer than two, other pool nodes so that the
// instance has a peer; every member tracks the Service's status file
// (LocalServiceStatus), so a member without a ready endpoint is in FAULT
// and never holds the VIP, and a draining one holds it at priority 1
// until a member with a ready endpoint takes it.
func (p *Plan) addLocal(ls cluster.LocalService) error {
	pool := p.model.Pool(ls.Pool)
	if pool == nil || len(ls.VIPs) == 0 || len(ls.Nodes) == 0 {
		return nil
	}
	key := v1alpha1.ServiceKey(ls.Name)
	track := keyIdent(key)
	p.tracks = append(p.tracks, keepalived.TrackFile{Name: track, Path: p.root + onnode.LocalServiceStatusFile(ls.Name), Weight: 1,
		Why: fmt.Sprintf("written by the sidecar: %d while a ready endpoint of Service %s runs on this node, %d (priority 1) while only a terminating one serves, %d (FAULT) otherwise",
			onnode.LocalReady, ls.Name, onnode.LocalDraining, onnode.LocalNone)})
	endpoint := map[string]bool{}
	members := append(slices.Clone(ls.Nodes), ls.Draining...)
	if pool.MaxHolders == 0 || len(members)+len(ls.Unready) <= pool.MaxHolders {
		members = append(members, ls.Unready...)
	}
	for _, n := range members {
		endpoint[n] = true
	}
	sel := pool.NodeSelector
	first := len(p.instances)
	if err := p.add(instanceSpec{key: key, vips: ls.VIPs, eligible: func(n *cluster.Node) bool { return endpoint[n.Name] && cluster.Matches(sel, n.Labels) },
		maxMembers: pool.MaxHolders, on: pool.VIPInterface(), owner: "service pool " + pool.Name,
		files: []string{track}, why: "Service " + ls.Name + " (externalTrafficPolicy Local): held only by a node with a ready endpoint"}); err != nil {
		return err
	}
	for _, inst := range p.instances[first:] {
		if len(inst.eligible) == 0 || len(inst.eligible) >= 2 {
			continue
		}
		var pad *member
		for _, n := range p.state.Nodes {
			node := p.nodes[n.Name]
			src, ok := addressIn(node, inst.network)
			if endpoint[n.Name] || !ok || !cluster.Matches(sel, node.Labels) {
				continue
			}
			if m := (member{node: node, src: src, priority: priority(key, node.Name)}); pad == nil || m.priority > pad.priority {
				pad = &m
			}
		}
		if pad != nil {
			inst.eligible = append(inst.eligible, *pad)
			sort.SliceStable(inst.eligible, func(i, j int) bool { return inst.eligible[i].node.Name < inst.eligible[j].node.Name })
			p.byNode[pad.node.Name] = append(p.byNode[pad.node.Name], inst)
		}
	}
	excludeFromServices(p.instances[first:])
	return nil
}

// excludeFromServices puts the members whose node carries
// cluster.ExcludeLBLabel at excludedPriority, below every other member: a
// peer preempts them while they still answer (make-before-break, as a
// drain), which leaving the instance at once would not be. They stay
// members, so a node labelled for maintenance holds a Service VIP only
// when no peer can.
func excludeFromServices(instances []*instance) {
	for _, inst := range instances {
		for i := range inst.eligible {
			if inst.eligible[i].node.ExcludeServices {
				inst.eligible[i].priority, inst.eligible[i].excluded = excludedPriority, true
			}
		}
	}
}

// steer gives each instance of one pool (per family) a different preferred
// holder, so the pool's VIPs are served by several nodes at once even when
// the hashed priorities happen to favour one node. Each instance takes its
// highest-hashed node not yet taken by an earlier instance (all nodes taken:
// start over). A node joining changes a choice only where it wins the hash.
func steer(instances []*instance) {
	for _, fam := range []int{4, 6} {
		taken := map[string]bool{}
		for _, inst := range instances {
			if inst.family != fam || len(inst.eligible) == 0 {
				continue
			}
			candidates := 0
			for _, m := range inst.eligible {
				if !m.excluded {
					candidates++
				}
			}
			if len(taken) >= candidates {
				taken = map[string]bool{}
			}
			best := -1
			for i, m := range inst.eligible {
				if taken[m.node.Name] || m.excluded {
					continue
				}
				if best < 0 || m.priority > inst.eligible[best].priority || (m.priority == inst.eligible[best].priority && m.node.Name < inst.eligible[best].node.Name) {
					best = i
				}
			}
			if best < 0 {
				continue // every member excluded
			}
			inst.eligible[best].priority = preferredPriority
			taken[inst.eligible[best].node.Name] = true
		}
	}
}

// instanceSpec is one VRRP instance key's members and checks, before it
// is split by IP family.
type instanceSpec struct {
	key        v1alpha1.InstanceKey
	vips       []netip.Addr
	eligible   func(*cluster.Node) bool
	maxMembers int
	scripts    []string
	files      []string
	why        string
	// on is where the VIPs live when not on the VRRP interface; owner
	// names the pool or controller that asked for it, for messages.
	on    v1alpha1.VIPInterface
	owner string
	// routed: the VIPs are announced over BGP by their holder, whose
	// members may be in different machine networks (spec.api.routed).
	routed bool
}

// add creates one instance per IP family of s.vips.
func (p *Plan) add(s instanceSpec) error {
	id, ok := p.ids[s.key]
	if !ok {
		return fmt.Errorf("no VRRP ID for instance %s", s.key)
	}
	for _, fam := range []int{4, 6} {
		var mine []netip.Addr
		for _, a := range s.vips {
			if (fam == 4) == a.Is4() {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 {
			continue
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].Less(mine[j]) })
		network, ok := p.vrrpNetwork(mine[0], s.on)
		if !ok && !s.routed {
			return fmt.Errorf("%s: %s is outside every machine network", s.key, mine[0])
		}
		inst := &instance{key: s.key, family: fam, vrid: id, vips: mine, network: network, routed: s.routed, scripts: s.scripts, files: s.files, why: s.why, on: s.on}
		best := ranked{max: s.maxMembers}
		for _, n := range p.state.Nodes {
			node := p.nodes[n.Name]
			if !s.eligible(node) {
				continue
			}
			src, ok := p.sourceOf(node, inst)
			if !ok || !p.hasVIPInterface(node, s) {
				continue
			}
			best.offer(member{node: node, src: src, priority: priority(s.key, node.Name)})
		}
		inst.eligible = best.members
		// Peers are listed by node name whatever order the nodes came in.
		sort.SliceStable(inst.eligible, func(i, j int) bool { return inst.eligible[i].node.Name < inst.eligible[j].node.Name })
		p.instances = append(p.instances, inst)
		for _, m := range inst.eligible {
			p.byNode[m.node.Name] = append(p.byNode[m.node.Name], inst)
		}
	}
	return nil
}

// ranked keeps the max members the hash likes best (all of them when max
// is 0): a node joining or leaving changes the set only where it ranks
// among them. It holds max members at most, never every eligible node: at
// 5000 nodes a pool's 80 instances would otherwise collect 400,000
// members to keep 640 (issue 47).
type ranked struct {
	max     int
	members []member
	// worst indexes the lowest-ranked member once max are held.
	worst int
}

func (r *ranked) offer(m member) {
	if r.max <= 0 || len(r.members) < r.max {
		r.members = append(r.members, m)
		if len(r.members) == r.max {
			r.findWorst()
		}
		return
	}
	if !ranksAbove(m, r.members[r.worst]) {
		return
	}
	r.members[r.worst] = m
	r.findWorst()
}

func (r *ranked) findWorst() {
	r.worst = 0
	for i := range r.members {
		if ranksAbove(r.members[r.worst], r.members[i]) {
			r.worst = i
		}
	}
}

// ranksAbove orders members by priority, then name (names are unique).
func ranksAbove(a, b member) bool {
	return a.priority > b.priority || (a.priority == b.priority && a.node.Name < b.node.Name)
}

// checkPoolHolders notes a pool that no node could ever hold, whether or
// not it has addresses allocated yet: that is a wrong nodeSelector or node
// list, and allocating from it would hand out dead addresses.
func (p *Plan) checkPoolHolders(pool *cluster.Pool) {
	for _, r := range pool.Ranges {
		network, ok := p.machineNetwork(r.First)
		if !ok {
			continue
		}
		found := false
		for i := range p.state.Nodes {
			n := &p.state.Nodes[i]
			if _, in := addressIn(n, network); in && cluster.Matches(pool.NodeSelector, n.Labels) {
				found = true
				break
			}
		}
		if !found {
			p.unplaced = append(p.unplaced, fmt.Sprintf("service pool %s: no node matches its nodeSelector %v with an address in %s", pool.Name, pool.NodeSelector, network))
			return
		}
	}
}

// Unplaced lists what no node can hold: its VIPs would answer nowhere.
// `vipctl render` refuses it; the sidecar reports it and renders the rest.
func (p *Plan) Unplaced() []string {
	out := append([]string{}, p.unplaced...)
	for _, inst := range p.instances {
		if len(inst.eligible) == 0 {
			out = append(out, fmt.Sprintf("VRRP instance %s (IPv%d): no node is eligible (%s, with an address in %s)", inst.key, inst.family, inst.why, inst.where()))
		}
	}
	return out
}

func (p *Plan) machineNetwork(a netip.Addr) (netip.Prefix, bool) {
	for _, n := range p.model.MachineNetworks {
		if n.Contains(a) {
			return n, true
		}
	}
	return netip.Prefix{}, false
}

// where names the network inst's members need an address in.
func (inst *instance) where() string {
	if inst.routed {
		return "a machine network"
	}
	return inst.network.String()
}

// sourceOf is the address node speaks VRRP from in inst: its address in
// the instance's machine network, or for a routed instance its first
// address of the family in any machine network.
func (p *Plan) sourceOf(node *cluster.Node, inst *instance) (netip.Addr, bool) {
	if !inst.routed {
		return addressIn(node, inst.network)
	}
	for _, a := range node.Addresses {
		if _, ok := p.machineNetwork(a); ok && a.Is4() == (inst.family == 4) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func addressIn(n *cluster.Node, network netip.Prefix) (netip.Addr, bool) {
	for _, a := range n.Addresses {
		if network.Contains(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// priority is rendezvous hashing: every node gets a stable pseudo-random
// priority per instance key, so each instance has its own preferred holder
// (instances spread over the nodes) and adding or removing a node never
// reshuffles the others. Both families of one key share priorities so a
// dual-stack VIP pair prefers the same node.
func priority(key v1alpha1.InstanceKey, node string) int {
	return minPriority + int(cluster.Hash([]byte(key), []byte(node))%priorityBuckets)
}

// notListed is the error for a node the plan does not know, naming the
// listed node that is probably it under another spelling.
func (p *Plan) notListed(node string) error {
	names := make([]string, 0, len(p.state.Nodes))
	for _, n := range p.state.Nodes {
		names = append(names, n.Name)
	}
	return errors.New(cluster.NotListed(node, "the node list", names))
}
