// Package status answers `vipctl status`: every VIP of a cluster, the
// instance that carries it, which nodes say they hold it (their
// vipctl.io/vips annotation) and whether that is healthy.
package status

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// VIP states in the status table.
const (
	StateOK         = "ok"
	StateNoHolder   = "no-holder"
	StateSplitBrain = "split-brain"
)

// Report is everything `vipctl status` shows; -o json|yaml prints it.
type Report struct {
	VIPs []VIPStatus `json:"vips"`
	// BGPSessions lists every node's BGP sessions (bgp pools only).
	BGPSessions []SessionStatus `json:"bgpSessions,omitempty"`
	// Object is the ClusterVIPs object's status, when the cluster has
	// the object.
	Object *ObjectVerdict `json:"object,omitempty"`
}

// SessionStatus is one BGP session of one node, as its sidecar publishes
// it in the vipctl.io/bgp-sessions annotation.
type SessionStatus struct {
	Node string `json:"node"`
	v1alpha1.BGPSession
}

// NewReport builds the whole report: Compute's VIP rows and every node's
// published BGP sessions. Unparsable annotations are reported as errors
// for their node and otherwise ignored.
func NewReport(c *v1alpha1.ClusterVIPs, nodes []corev1.Node, services []corev1.Service) (Report, []error) {
	rows, errs := Compute(c, nodes, services)
	sessions, serrs := Sessions(nodes)
	r := Report{VIPs: rows, BGPSessions: sessions}
	werrs := r.attachWire(nodes, time.Now())
	return r, slices.Concat(errs, serrs, werrs)
}

// Sessions lists the BGP sessions the nodes publish, by node and peer.
func Sessions(nodes []corev1.Node) ([]SessionStatus, []error) {
	var out []SessionStatus
	errs := published(nodes, v1alpha1.AnnotationNodeBGPSessions, v1alpha1.ParseBGPSessions, func(node string, s v1alpha1.BGPSession) {
		out = append(out, SessionStatus{Node: node, BGPSession: s})
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Peer < out[j].Peer
	})
	return out, errs
}

// VIPStatus is one row of `vipctl status`.
type VIPStatus struct {
	// Instance is the key of the VRRP instance that carries the address,
	// as vr-ids prints it and nodes publish it; "-" for a Service address
	// in no pool, which no instance carries.
	Instance string     `json:"instance"`
	Address  string     `json:"address"`
	Holders  []string   `json:"holders"`
	State    string     `json:"state"`
	Since    *time.Time `json:"since,omitempty"`
	Services []string   `json:"services,omitempty"`
	// Unreachable are the holders that no longer reach the API, or have
	// not been heard from since another took the VIP over (state
	// isolated, Classify): their claim predates it.
	Unreachable []string `json:"unreachable,omitempty"`
	// Wire are the nodes' views of the address on the wire that are not
	// one answer from a member: a stranger, nobody or several answering
	// (their vipctl.io/wire annotations, at most WireViewFresh old).
	Wire []WireNote `json:"wire,omitempty"`
	// holderSince is when each holder claimed the address.
	holderSince map[string]time.Time
}

// Compute lists every VIP of the config (API, ingress) and every address
// allocated to a served Service, with the key of the instance carrying it, with the nodes that say they hold it
// (their vipctl.io/vips annotation). An unparsable annotation is reported
// as an error for that node and otherwise ignored.
func Compute(c *v1alpha1.ClusterVIPs, nodes []corev1.Node, services []corev1.Service) ([]VIPStatus, []error) {
	hs, errs := publishedHolders(nodes)
	var rows []VIPStatus
	m := cluster.Compile(c)
	served, users := serviceUsers(m, services)
	var st cluster.State
	st.ServiceVIPs, st.LocalServices, _ = m.ServiceAddresses(served)
	// The function that gives the keys a node publishes (runtimecfg), so
	// the table and the annotations cannot name an instance differently.
	keys := m.VIPKeys(st)
	row := func(a netip.Addr) {
		name := "-"
		if key, ok := keys[a]; ok {
			name = key.String()
		}
		svcs := users[a]
		sort.Strings(svcs)
		rows = append(rows, hs.row(name, a, svcs))
	}
	for _, a := range m.FixedVIPs() {
		row(a)
	}
	order := make([]netip.Addr, 0, len(users))
	for a := range users {
		order = append(order, a)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Less(order[j]) })
	for _, a := range order {
		row(a)
	}
	return rows, errs
}

// held is one node's claim on an address, and since when.
type held struct {
	node  string
	since time.Time
}

// holders is what the nodes publish (their vipctl.io/vips annotation):
// who holds each address and, for a node whose list was too long to
// publish, which instances it holds: it holds each of their addresses it
// does not list.
type holders struct {
	byAddr   map[netip.Addr][]held
	unlisted map[v1alpha1.InstanceKey][]held
}

// publishedHolders reads every node's annotation. An unparsable one is
// an error for its node and otherwise ignored.
func publishedHolders(nodes []corev1.Node) (holders, []error) {
	h := holders{byAddr: map[netip.Addr][]held{}, unlisted: map[v1alpha1.InstanceKey][]held{}}
	errs := published(nodes, v1alpha1.AnnotationNodeVIPs, v1alpha1.ParseHeldVIPs, func(node string, v v1alpha1.HeldVIP) {
		if v.Unlisted > 0 {
			h.unlisted[v.Instance] = append(h.unlisted[v.Instance], held{node, v.Since})
		} else if a, err := netip.ParseAddr(v.Address); err == nil {
			h.byAddr[a.Unmap()] = append(h.byAddr[a.Unmap()], held{node, v.Since})
		}
	})
	return h, errs
}

// row is the status of address a of instance key.
func (h holders) row(key string, a netip.Addr, svcs []string) VIPStatus {
	r := VIPStatus{Instance: key, Address: a.String(), Services: svcs, Holders: []string{}}
	hs := h.byAddr[a]
	for _, u := range h.unlisted[v1alpha1.InstanceKey(key)] {
		if !slices.ContainsFunc(hs, func(h held) bool { return h.node == u.node }) {
			hs = append(hs, u)
		}
	}
	r.holderSince = make(map[string]time.Time, len(hs))
	for _, h := range hs {
		r.Holders = append(r.Holders, h.node)
		r.holderSince[h.node] = h.since
		if r.Since == nil || h.since.After(*r.Since) {
			t := h.since
			r.Since = &t
		}
	}
	sort.Strings(r.Holders)
	_, bgp := v1alpha1.InstanceKey(key).BGPPool()
	switch {
	case len(r.Holders) == 0:
		r.State = StateNoHolder
	case len(r.Holders) == 1 || bgp:
		// A bgp pool's address is announced by every node that
		// should attract it (the routers spread the traffic, ECMP):
		// its holders are the announcing nodes.
		r.State = StateOK
	default:
		r.State = StateSplitBrain
	}
	return r
}

// serviceUsers lists the Services vipctl serves and, per address, the
// Services that use it: their load-balancer addresses and the external
// IPs a pool announces for them.
func serviceUsers(m *cluster.Model, services []corev1.Service) ([]*corev1.Service, map[netip.Addr][]string) {
	served := make([]*corev1.Service, 0, len(services))
	users := map[netip.Addr][]string{}
	for i := range services {
		s := &services[i]
		if !m.Class.Reads(s) {
			continue
		}
		served = append(served, s)
		if m.Class.Serves(s) {
			for _, in := range s.Status.LoadBalancer.Ingress {
				if a, err := netip.ParseAddr(in.IP); err == nil {
					users[a.Unmap()] = append(users[a.Unmap()], cluster.NamespacedName(s))
				}
			}
		}
		for _, a := range m.ExternalIPs(s) {
			if !slices.Contains(users[a], cluster.NamespacedName(s)) {
				users[a] = append(users[a], cluster.NamespacedName(s))
			}
		}
	}
	return served, users
}

// published decodes one list annotation of every node and hands each
// entry to each; a value that does not parse is an error for its node.
func published[L ~[]T, T any](nodes []corev1.Node, key string, parse func(string) (L, error), each func(node string, v T)) []error {
	var errs []error
	for _, n := range nodes {
		list, err := parse(n.Annotations[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		for _, v := range list {
			each(n.Name, v)
		}
	}
	return errs
}

// Drained names the nodes asked to drain (`vipctl drain`), sorted.
func Drained(nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		if cluster.Drained(&nodes[i]) {
			out = append(out, nodes[i].Name)
		}
	}
	sort.Strings(out)
	return out
}

// Problems says what is unhealthy: a VIP with no holder or several, a
// BGP session not Established. None means healthy.
func (r Report) Problems() []string {
	var out []string
	bad := 0
	for _, v := range r.VIPs {
		if v.State != StateOK {
			bad++
		}
	}
	if bad > 0 {
		out = append(out, fmt.Sprintf("%d VIP(s) with no holder or more than one", bad))
	}
	var away []string
	for _, v := range r.VIPs {
		for _, n := range v.Unreachable {
			if !slices.Contains(away, n) {
				away = append(away, n)
			}
		}
	}
	if len(away) > 0 {
		sort.Strings(away)
		out = append(out, fmt.Sprintf("node(s) not reaching the API, whose claims are from before: %s", strings.Join(away, ", ")))
	}
	if wire := wireLines(r.VIPs); len(wire) > 0 {
		out = append(out, fmt.Sprintf("%d finding(s) on the wire: %s", len(wire), strings.Join(wire, "; ")))
	}
	var down []string
	for _, s := range r.BGPSessions {
		if !s.Established() {
			down = append(down, s.Node+"→"+s.Peer+" "+s.State)
		}
	}
	if len(down) > 0 {
		out = append(out, fmt.Sprintf("BGP session(s) not established: %s", strings.Join(down, ", ")))
	}
	return out
}

// Text renders the VIP table and, when a node reports BGP sessions, the
// sessions table after it.
func (r Report) Text(now time.Time) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "INSTANCE\tADDRESS\tHOLDER\tSTATE\tSINCE\tSERVICES")
	for _, v := range r.VIPs {
		holder := holderText(v)
		since := "-"
		if v.Since != nil {
			since = ago(*v.Since, now)
		}
		svcs := strings.Join(v.Services, ",")
		if svcs == "" {
			svcs = "-"
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Instance, v.Address, holder, v.State, since, svcs)
	}
	_ = w.Flush()
	if wire := wireLines(r.VIPs); len(wire) > 0 {
		b.WriteString("\nOn the wire (each node asks its segment who has the VIPs of its instances):\n")
		for _, l := range wire {
			b.WriteString("  " + l + "\n")
		}
	}
	if r.Object != nil {
		b.WriteString("\n" + r.Object.Text())
	}
	if len(r.BGPSessions) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "NODE\tPEER\tASN\tSTATE\tSINCE\tPREFIXES\tBFD")
	for _, s := range r.BGPSessions {
		bfd := s.BFD
		if bfd == "" {
			bfd = "-"
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s\n", s.Node, s.Peer, s.ASN, s.State, ago(s.Since, now), s.PrefixesSent, bfd)
	}
	_ = w.Flush()
	return b.String()
}

func ago(t, now time.Time) string {
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), now.Sub(t).Round(time.Second))
}
