package vrid

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Check is one run of `vipctl vr-ids`: a cluster's IDs, the other
// clusters known on the LAN and, optionally, a live capture.
type Check struct {
	Request Request
	// Others are the other clusters on the LAN.
	Others []KnownCluster
	// Listen, when set, captures VRRP adverts on this interface for
	// ListenFor and counts them as taken IDs.
	Listen    string
	ListenFor time.Duration
	// Networks are the cluster's machine networks: when Listen names an
	// interface this host lacks (br-ex before installing), the error names
	// the interfaces with an address in them.
	Networks []netip.Prefix
}

// Report is what `vipctl vr-ids -o json|yaml` prints; Text keeps
// OpenShift's two first lines byte for byte so existing scripts keep
// parsing them.
type Report struct {
	Cluster string  `json:"cluster"`
	IDs     []Entry `json:"ids"`
	// OpenShiftKeepalived are the IDs OpenShift's own keepalived uses for
	// the cluster's API and ingress VIPs (spec.mode poolsOnly); IDs keeps
	// clear of them.
	OpenShiftKeepalived []Entry        `json:"openshiftKeepalived,omitempty"`
	Listened            *Listened      `json:"listened,omitempty"`
	Live                []LiveSighting `json:"live,omitempty"`
	Clashes             []string       `json:"clashes,omitempty"`
	ProposedOverrides   map[Key]uint8  `json:"proposedOverrides,omitempty"`
}

// Listened says what --listen checked, also when it heard nothing.
type Listened struct {
	Interface string `json:"interface"`
	// For is how long it listened ("10s").
	For string `json:"for"`
	// Adverts counts the VRRP advertisements heard.
	Adverts int `json:"adverts"`
	// IDs are the VRRP IDs heard, each once.
	IDs []uint8 `json:"ids"`
}

// LiveSighting is an advert seen on an interface.
type LiveSighting struct {
	Interface string `json:"interface"`
	Observation
}

// Run assigns the IDs, looks for clashes within the cluster, with the
// other clusters and with what is live, and proposes overrides that clear
// every clash.
func (c Check) Run(ctx context.Context) (*Report, error) {
	assignment, err := Assign(c.Request)
	if err != nil {
		return nil, err
	}
	report := &Report{Cluster: c.Request.Cluster, IDs: assignment.Entries, OpenShiftKeepalived: assignment.OpenShift}
	var live []Observation
	if c.Listen != "" {
		if msg := v1alpha1.InterfaceNameError(c.Listen); msg != "" {
			return nil, fmt.Errorf("--listen %q: %s", c.Listen, msg)
		}
		if c.ListenFor <= 0 {
			return nil, fmt.Errorf("--for: must be positive, got %s", c.ListenFor)
		}
		capture, err := Listen(ctx, c.Listen, c.ListenFor)
		if errors.Is(err, ErrNoInterface) {
			return nil, fmt.Errorf("--listen %s: %w", c.Listen, noInterface(c.Listen, c.Networks))
		}
		if err != nil {
			return nil, fmt.Errorf("--listen %s: %w", c.Listen, err)
		}
		live = capture.Routers
		report.Listened = &Listened{Interface: capture.Interface, For: capture.For.String(), Adverts: capture.Adverts, IDs: []uint8{}}
		for _, obs := range live {
			report.Live = append(report.Live, LiveSighting{Interface: c.Listen, Observation: obs})
			if !slices.Contains(report.Listened.IDs, obs.ID) {
				report.Listened.IDs = append(report.Listened.IDs, obs.ID)
			}
		}
	}
	clashes := FindClashes(assignment, c.Others, live, c.Listen)
	if len(clashes) == 0 {
		return report, nil
	}
	var taken []uint8
	for _, cl := range clashes {
		report.Clashes = append(report.Clashes, cl.String())
		taken = append(taken, cl.ID)
	}
	taken = append(taken, otherIDs(c.Others)...)
	for _, obs := range live {
		taken = append(taken, obs.ID)
	}
	proposal, err := ProposeOverrides(c.Request, clashes, taken)
	if err != nil {
		return nil, fmt.Errorf("no clash-free set of IDs exists: %w", err)
	}
	// The proposal is printed as a whole virtualRouterIDs block, so it keeps
	// the file's own pins next to the new ones.
	report.ProposedOverrides = map[Key]uint8{}
	for k, id := range c.Request.Overrides {
		report.ProposedOverrides[k] = id
	}
	for k, id := range proposal {
		report.ProposedOverrides[k] = id
	}
	return report, nil
}

func otherIDs(others []KnownCluster) []uint8 {
	var ids []uint8
	for _, o := range others {
		if len(o.IDs) == 0 {
			api, ingress := OpenShiftIDs(o.Name)
			ids = append(ids, api, ingress)
			continue
		}
		for _, id := range o.IDs {
			ids = append(ids, id)
		}
	}
	return ids
}

// heardOwnID tells whether --listen heard one of the cluster's IDs.
func (r *Report) heardOwnID() bool {
	for _, e := range r.IDs {
		if slices.Contains(r.Listened.IDs, e.ID) {
			return true
		}
	}
	return false
}

// Text is the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	var rest []Entry
	// OpenShift's own keepalived's IDs are still the cluster's: the two
	// lines baremetal-runtimecfg prints come first either way.
	for _, e := range append(slices.Clone(r.OpenShiftKeepalived), r.IDs...) {
		switch e.Key {
		case KeyAPI:
			fmt.Fprintf(&b, "APIVirtualRouterID: %d\n", e.ID)
		case KeyIngress:
			fmt.Fprintf(&b, "IngressVirtualRouterID: %d\n", e.ID)
		default:
			rest = append(rest, e)
		}
	}
	for _, e := range rest {
		fmt.Fprintf(&b, "VirtualRouterID %s: %d\n", e.Key, e.ID)
	}
	if slices.ContainsFunc(r.IDs, func(e Entry) bool { return e.Key == v1alpha1.KeyAPIInternal }) {
		b.WriteString("# api-int: OpenShift runs no VRRP instance for api-int (its api-int resolves to the API VIP); this ID is vipctl's own, derived like an ingress shard's\n")
	}
	if len(r.OpenShiftKeepalived) > 0 {
		ids := make([]string, len(r.OpenShiftKeepalived))
		for i, e := range r.OpenShiftKeepalived {
			ids[i] = fmt.Sprintf("%d (%s)", e.ID, e.Key)
		}
		fmt.Fprintf(&b, "# mode poolsOnly: OpenShift's own keepalived uses %s; vipctl's IDs keep clear of them\n", strings.Join(ids, " and "))
	}
	if l := r.Listened; l != nil {
		fmt.Fprintf(&b, "listened on %s for %s: %d VRRP advertisement(s)", l.Interface, l.For, l.Adverts)
		if len(l.IDs) == 0 {
			b.WriteString(", no VRRP ID in use there\n")
		} else {
			ids := make([]string, len(l.IDs))
			for i, id := range l.IDs {
				ids[i] = strconv.Itoa(int(id))
			}
			fmt.Fprintf(&b, ", VRRP IDs in use there: %s\n", strings.Join(ids, ", "))
		}
	}
	for _, l := range r.Live {
		fmt.Fprintf(&b, "live: VirtualRouterID %d from %s on %s (VRRPv%d)\n", l.ID, l.Source, l.Interface, l.Version)
	}
	if l := r.Listened; l != nil && !r.heardOwnID() {
		fmt.Fprintf(&b, "no ID of this cluster heard on %s\n", l.Interface)
	}
	for _, c := range r.Clashes {
		fmt.Fprintln(&b, c)
	}
	if len(r.ProposedOverrides) > 0 {
		keys := make([]Key, 0, len(r.ProposedOverrides))
		for k := range r.ProposedOverrides {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		b.WriteString("# clash-free overrides; paste under spec.vrrp in the cluster file:\nvirtualRouterIDs:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %d\n", k, r.ProposedOverrides[k])
		}
	}
	return b.String()
}
