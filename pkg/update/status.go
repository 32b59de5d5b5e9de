package update

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// VIP states in the status table.
const (
	StateOK         = "ok"
	StateNoHolder   = "no-holder"
	StateSplitBrain = "split-brain"
)

// VIPStatus is one row of `vipctl status`.
type VIPStatus struct {
	Kind     string     `json:"kind"`
	Address  string     `json:"address"`
	Holders  []string   `json:"holders"`
	State    string     `json:"state"`
	Since    *time.Time `json:"since,omitempty"`
	Services []string   `json:"services,omitempty"`
}

// Status lists every VIP of the config (API, ingress) and every address
// allocated to a served Service, with the nodes that say they hold it
// (their vipctl.io/vips annotation). An unparsable annotation is reported
// as an error for that node and otherwise ignored.
func Status(c *v1alpha1.ClusterVIPs, nodes []corev1.Node, services []corev1.Service) ([]VIPStatus, []error) {
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
	add := func(kind string, a netip.Addr, svcs []string) {
		r := VIPStatus{Kind: kind, Address: a.String(), Services: svcs, Holders: []string{}}
		for _, h := range holders[a] {
			r.Holders = append(r.Holders, h.node)
			if r.Since == nil || h.since.After(*r.Since) {
				t := h.since
				r.Since = &t
			}
		}
		sort.Strings(r.Holders)
		switch len(r.Holders) {
		case 0:
			r.State = StateNoHolder
		case 1:
			r.State = StateOK
		default:
			r.State = StateSplitBrain
		}
		rows = append(rows, r)
	}
	for _, v := range c.Spec.API.VIPs {
		add("api", netip.MustParseAddr(v), nil)
	}
	for _, in := range c.Spec.Ingress {
		for _, v := range in.VIPs {
			add("ingress/"+in.Name, netip.MustParseAddr(v), nil)
		}
	}
	users := map[netip.Addr][]string{}
	var order []netip.Addr
	for i := range services {
		s := &services[i]
		if !runtimecfg.Served(s) {
			continue
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(in.IP)
			if err != nil {
				continue
			}
			a = a.Unmap()
			if _, seen := users[a]; !seen {
				order = append(order, a)
			}
			users[a] = append(users[a], s.Namespace+"/"+s.Name)
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Less(order[j]) })
	for _, a := range order {
		kind := "pool/?"
		for i := range c.Spec.ServicePools {
			p := &c.Spec.ServicePools[i]
			for _, s := range p.Addresses {
				if r, err := v1alpha1.ParseAddressRange(s); err == nil && r.Contains(a) {
					kind = "pool/" + p.Name
				}
			}
		}
		sort.Strings(users[a])
		add(kind, a, users[a])
	}
	return rows, errs
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

// StatusText renders the table.
func StatusText(rows []VIPStatus, now time.Time) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "KIND\tADDRESS\tHOLDER\tSTATE\tSINCE\tSERVICES")
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
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, r.Address, holder, r.State, since, svcs)
	}
	_ = w.Flush()
	return b.String()
}
