// Package status answers `vipctl status`: every VIP of a cluster, the
// instance that carries it, which nodes say they hold it (their
// vipctl.io/vips annotation) and whether that is healthy.
package status

import (
	"fmt"
	"net/netip"
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
}

// Compute lists every VIP of the config (API, ingress) and every address
// allocated to a served Service, with the key of the instance carrying it, with the nodes that say they hold it
// (their vipctl.io/vips annotation). An unparsable annotation is reported
// as an error for that node and otherwise ignored.
func Compute(c *v1alpha1.ClusterVIPs, nodes []corev1.Node, services []corev1.Service) ([]VIPStatus, []error) {
	type held struct {
		node  string
		since time.Time
	}
	holders := map[netip.Addr][]held{}
	var errs []error
	for _, n := range nodes {
		hv, err := v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs])
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		for _, h := range hv {
			if a, err := netip.ParseAddr(h.Address); err == nil {
				holders[a.Unmap()] = append(holders[a.Unmap()], held{n.Name, h.Since})
			}
		}
	}
	var rows []VIPStatus
	add := func(key string, a netip.Addr, svcs []string) {
		r := VIPStatus{Instance: key, Address: a.String(), Services: svcs, Holders: []string{}}
		for _, h := range holders[a] {
			r.Holders = append(r.Holders, h.node)
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
		rows = append(rows, r)
	}
	m := cluster.Compile(c)
	served := make([]*corev1.Service, 0, len(services))
	users := map[netip.Addr][]string{}
	for i := range services {
		s := &services[i]
		if !cluster.Served(s) {
			continue
		}
		served = append(served, s)
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				users[a.Unmap()] = append(users[a.Unmap()], cluster.NamespacedName(s))
			}
		}
	}
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
		add(name, a, svcs)
	}
	for _, v := range c.Spec.API.VIPs {
		row(netip.MustParseAddr(v))
	}
	for _, in := range c.Spec.Ingress {
		for _, v := range in.VIPs {
			row(netip.MustParseAddr(v))
		}
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

// Healthy tells whether every VIP has exactly one holder.
func Healthy(rows []VIPStatus) bool {
	for _, r := range rows {
		if r.State != StateOK {
			return false
		}
	}
	return true
}

// Text renders the table.
func Text(rows []VIPStatus, now time.Time) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "INSTANCE\tADDRESS\tHOLDER\tSTATE\tSINCE\tSERVICES")
	for _, r := range rows {
		holder := strings.Join(r.Holders, ",")
		if holder == "" {
			holder = "-"
		}
		since := "-"
		if r.Since != nil {
			since = fmt.Sprintf("%s (%s ago)", r.Since.UTC().Format(time.RFC3339), now.Sub(*r.Since).Round(time.Second))
		}
		svcs := strings.Join(r.Services, ",")
		if svcs == "" {
			svcs = "-"
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Instance, r.Address, holder, r.State, since, svcs)
	}
	_ = w.Flush()
	return b.String()
}
