// Package preflight checks, before vipctl's MachineConfigs go in, that no
// host on the segment already answers for an address of the config: the
// load balancer a cluster is being cut over from, a forgotten keepalived,
// a machine given a VIP by mistake. Two holders of one address split its
// clients between them, and keepalived cannot see a holder that speaks no
// VRRP. It asks the way a client does: an ARP request (IPv4) or a
// neighbour solicitation (IPv6) for every address on the interface, and
// reports each link-layer address that answers (`vipctl preflight`,
// docs/preflight.md).
package preflight

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
)

// MaxPoolAddresses is the largest pool whose every address is asked for;
// a larger one (any IPv6 /64) is asked for by its VRRP anchors only.
const MaxPoolAddresses = 1024

// DefaultTimeout is how long answers are awaited after the last request.
const DefaultTimeout = time.Second

// Target is one address to ask for, and where the config names it.
type Target struct {
	Addr netip.Addr
	// Field is the config's field path (spec.api.vips[0]), or a pool's
	// path and name for its addresses.
	Field string
}

// Result is what was heard for one address.
type Result struct {
	Address string `json:"address"`
	Field   string `json:"field"`
	// AnsweredBy are the link-layer addresses that answered for it.
	AnsweredBy []string `json:"answeredBy,omitempty"`
	// Local says this host holds it itself.
	Local bool `json:"local,omitempty"`
}

// Held tells whether someone holds the address.
func (r Result) Held() bool { return r.Local || len(r.AnsweredBy) > 0 }

// Report is a preflight's findings.
type Report struct {
	Interface string `json:"interface"`
	// Asked is how many addresses were asked for.
	Asked int `json:"asked"`
	// Held are the addresses someone answers for.
	Held []Result `json:"held"`
	// NotAsked say what was left out, and why.
	NotAsked []string `json:"notAsked,omitempty"`
}

// Problems are the held addresses, one line each.
func (r *Report) Problems() []string {
	out := make([]string, 0, len(r.Held))
	for _, h := range r.Held {
		who := "answered by " + strings.Join(h.AnsweredBy, ", ")
		if h.Local {
			who = "held by this host"
			if len(h.AnsweredBy) > 0 {
				who += ", and answered by " + strings.Join(h.AnsweredBy, ", ")
			}
		}
		out = append(out, fmt.Sprintf("%s (%s) is %s", h.Address, h.Field, who))
	}
	return out
}

// Text is the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "asked for %d addresses on %s with ARP and neighbour solicitations\n", r.Asked, r.Interface)
	for _, n := range r.NotAsked {
		fmt.Fprintf(&b, "not asked: %s\n", n)
	}
	if len(r.Held) == 0 {
		b.WriteString("no host answers for any of them\n")
	}
	for _, p := range r.Problems() {
		fmt.Fprintf(&b, "HELD: %s\n", p)
	}
	return b.String()
}

// Targets lists the addresses of c to ask for: every API and ingress VIP,
// every address of a vrrp pool of at most MaxPoolAddresses, the VRRP
// anchors of a larger one. bgp pools are routed, not held on the
// segment: notAsked says so, and what else was left out.
func Targets(c *v1alpha1.ClusterVIPs) (targets []Target, notAsked []string) {
	m := cluster.Compile(c)
	if c.Spec.API.Routed {
		notAsked = append(notAsked, "spec.api.vips and internalVIPs: routed (spec.api.routed), announced to the routers rather than held on the segment")
	} else {
		for i, a := range m.API {
			targets = append(targets, Target{a, fmt.Sprintf("spec.api.vips[%d]", i)})
		}
		for i, a := range m.APIInternal {
			targets = append(targets, Target{a, fmt.Sprintf("spec.api.internalVIPs[%d]", i)})
		}
	}
	for i, in := range m.Ingress {
		if c.Spec.Ingress[i].Routed {
			notAsked = append(notAsked, fmt.Sprintf("spec.ingress[%d].vips: routed, announced to the routers rather than held on the segment", i))
			continue
		}
		for j, a := range in.VIPs {
			targets = append(targets, Target{a, fmt.Sprintf("spec.ingress[%d].vips[%d]", i, j)})
		}
	}
	for i, p := range m.Pools {
		field := fmt.Sprintf("spec.servicePools[%d] (%s)", i, p.Name)
		if p.IsBGP() {
			notAsked = append(notAsked, field+": mode bgp, routed to the nodes rather than held on the segment")
			continue
		}
		size := new(big.Int)
		for _, r := range p.Ranges {
			size.Add(size, r.Size())
		}
		if size.Cmp(big.NewInt(MaxPoolAddresses)) > 0 {
			var anchors []netip.Addr
			for _, v4 := range []bool{true, false} {
				anchors = append(anchors, p.Anchors(v4)...)
			}
			for _, a := range anchors {
				targets = append(targets, Target{a, field + " anchor"})
			}
			notAsked = append(notAsked, fmt.Sprintf("%s: %s addresses, more than %d: only its %d VRRP anchors were asked for", field, size, MaxPoolAddresses, len(anchors)))
			continue
		}
		for _, r := range p.Ranges {
			for a := r.First; r.Contains(a); a = a.Next() {
				targets = append(targets, Target{a, field})
				if a == r.Last {
					break
				}
			}
		}
	}
	return targets, notAsked
}

// Options are the inputs of Run.
type Options struct {
	// Interface is where to ask: a host interface on the VIPs' segment.
	Interface string
	// Timeout is how long answers are awaited after the last request.
	Timeout time.Duration
}

// Run asks for every target of c on the interface and reports who holds
// which. It needs CAP_NET_RAW.
func Run(ctx context.Context, c *v1alpha1.ClusterVIPs, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	targets, notAsked := Targets(c)
	ifi, err := net.InterfaceByName(o.Interface)
	if err != nil {
		return nil, fmt.Errorf("--interface %s: %w (name the interface of this host on the machine network)", o.Interface, err)
	}
	addrs := make([]netip.Addr, 0, len(targets))
	for _, t := range targets {
		addrs = append(addrs, t.Addr)
	}
	heard, err := Ask(ctx, ifi, addrs, o.Timeout)
	if err != nil {
		return nil, err
	}
	local, err := dataplane.LinkAddresses()
	if err != nil {
		return nil, err
	}
	r := &Report{Interface: o.Interface, Asked: len(targets), Held: []Result{}, NotAsked: notAsked}
	for _, t := range targets {
		res := Result{Address: t.Addr.String(), Field: t.Field, Local: slices.Contains(local, t.Addr)}
		for _, mac := range heard[t.Addr] {
			res.AnsweredBy = append(res.AnsweredBy, mac.String())
		}
		sort.Strings(res.AnsweredBy)
		if res.Held() {
			r.Held = append(r.Held, res)
		}
	}
	return r, nil
}
