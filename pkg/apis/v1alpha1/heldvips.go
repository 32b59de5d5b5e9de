package v1alpha1

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// HeldVIP is one address a node holds, as published in AnnotationNodeVIPs.
type HeldVIP struct {
	// Address is the VIP; empty in an unlisted entry (Unlisted).
	Address string `json:"address,omitempty"`
	// Instance is the key of the VRRP instance carrying it (InstanceKey),
	// empty when the address is on the interface but in no instance this
	// node renders.
	Instance InstanceKey `json:"instance,omitempty"`
	// Since is when this node was first seen holding it.
	Since time.Time `json:"since"`
	// Unlisted, when the node's list was too long to publish, is how many
	// addresses of Instance the node holds (Address empty): an instance's
	// addresses move together, so a reader counts the node as holding
	// every address of Instance.
	Unlisted int `json:"unlisted,omitempty"`
}

// HeldVIPs is the value of AnnotationNodeVIPs, sorted by address
// (unlisted entries first).
type HeldVIPs []HeldVIP

// MaxHeldVIPsBytes bounds the published value: the apiserver refuses a
// Node whose annotations together pass 256 KiB, and a node holding a
// whole pool of thousands of addresses would pass it as a plain list.
const MaxHeldVIPsBytes = 128 << 10

// maxHeldExpanded bounds what one value may expand to when read: a range
// is written by a sidecar, but read by every CLI, and "::-ffff::" must
// not take all of its memory.
const maxHeldExpanded = 1 << 20

// heldGroup is the published form: the addresses of one instance first
// seen at one time, consecutive runs written as "first-last". Readers
// also take the form before it, one object per address ("address").
type heldGroup struct {
	Address   string      `json:"address,omitempty"`
	Addresses []string    `json:"addresses,omitempty"`
	Instance  InstanceKey `json:"instance,omitempty"`
	Since     time.Time   `json:"since"`
	Unlisted  int         `json:"unlisted,omitempty"`
}

// ParseHeldVIPs decodes an AnnotationNodeVIPs value; empty means none.
func ParseHeldVIPs(s string) (HeldVIPs, error) {
	groups, err := parseNodeAnnotation[[]heldGroup](AnnotationNodeVIPs, s)
	if err != nil {
		return nil, err
	}
	var out HeldVIPs
	for _, g := range groups {
		if g.Unlisted > 0 {
			out = append(out, HeldVIP{Instance: g.Instance, Since: g.Since, Unlisted: g.Unlisted})
		}
		if g.Address != "" {
			out = append(out, HeldVIP{Address: g.Address, Instance: g.Instance, Since: g.Since})
		}
		for _, r := range g.Addresses {
			addrs, err := expandRange(r, maxHeldExpanded-len(out))
			if err != nil {
				return nil, fmt.Errorf("annotation %s: %w", AnnotationNodeVIPs, err)
			}
			for _, a := range addrs {
				out = append(out, HeldVIP{Address: a.String(), Instance: g.Instance, Since: g.Since})
			}
		}
	}
	slices.SortStableFunc(out, compareHeld)
	return out, nil
}

// compareHeld orders unlisted entries first (by instance), then by
// address as addresses (an unparsable one as a string, last).
func compareHeld(x, y HeldVIP) int {
	switch {
	case x.Address == "" && y.Address == "":
		return cmp.Compare(x.Instance, y.Instance)
	case x.Address == "":
		return -1
	case y.Address == "":
		return 1
	}
	ax, ex := netip.ParseAddr(x.Address)
	ay, ey := netip.ParseAddr(y.Address)
	switch {
	case ex == nil && ey == nil:
		return ax.Compare(ay)
	case ex != nil && ey != nil:
		return strings.Compare(x.Address, y.Address)
	case ex == nil:
		return -1
	}
	return 1
}

// expandRange reads "a" or "a-b" (a ≤ b, one family), at most max
// addresses.
func expandRange(r string, max int) ([]netip.Addr, error) {
	from, to, isRange := strings.Cut(r, "-")
	a, err := netip.ParseAddr(from)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", r, err)
	}
	if !isRange {
		return []netip.Addr{a}, nil
	}
	b, err := netip.ParseAddr(to)
	if err != nil {
		return nil, fmt.Errorf("range %q: %w", r, err)
	}
	if a.Is4() != b.Is4() || b.Less(a) {
		return nil, fmt.Errorf("range %q: the last address is before the first or of another family", r)
	}
	var out []netip.Addr
	for x := a; ; x = x.Next() {
		if len(out) == max {
			return nil, fmt.Errorf("range %q: more than %d addresses", r, maxHeldExpanded)
		}
		out = append(out, x)
		if x == b {
			return out, nil
		}
	}
}

// String encodes the annotation value: the addresses grouped by instance
// and Since, consecutive ones as ranges. Past MaxHeldVIPsBytes each
// instance's groups become one, seen since the latest of them; past it
// still, each instance is published as a count (Unlisted).
func (h HeldVIPs) String() string {
	if len(h) == 0 {
		return "[]"
	}
	for _, level := range []heldLevel{bySince, byInstance, counted} {
		b, _ := json.Marshal(h.groups(level))
		if len(b) <= MaxHeldVIPsBytes || level == counted {
			return string(b)
		}
	}
	panic("unreachable")
}

type heldLevel int

const (
	bySince heldLevel = iota
	byInstance
	counted
)

func (h HeldVIPs) groups(level heldLevel) []heldGroup {
	type key struct {
		instance InstanceKey
		since    time.Time
	}
	latest := map[InstanceKey]time.Time{}
	for _, v := range h {
		if v.Since.After(latest[v.Instance]) {
			latest[v.Instance] = v.Since
		}
	}
	byKey := map[key][]netip.Addr{}
	unlisted := map[key]int{}
	var strays []HeldVIP
	for _, v := range h {
		k := key{v.Instance, v.Since.UTC()}
		if level != bySince {
			k.since = latest[v.Instance].UTC()
		}
		a, err := netip.ParseAddr(v.Address)
		switch {
		case v.Address == "" || level == counted:
			unlisted[k] += max(v.Unlisted, 1)
		case err != nil:
			strays = append(strays, v)
		default:
			byKey[k] = append(byKey[k], a)
		}
	}
	var out []heldGroup
	for k, n := range unlisted {
		out = append(out, heldGroup{Instance: k.instance, Since: k.since, Unlisted: n})
	}
	for k, addrs := range byKey {
		out = append(out, heldGroup{Instance: k.instance, Since: k.since, Addresses: ranges(addrs)})
	}
	for _, v := range strays {
		out = append(out, heldGroup{Address: v.Address, Instance: v.Instance, Since: v.Since.UTC()})
	}
	slices.SortFunc(out, func(x, y heldGroup) int {
		return cmp.Or(cmp.Compare(x.Instance, y.Instance), x.Since.Compare(y.Since), cmp.Compare(x.Unlisted, y.Unlisted),
			slices.Compare(x.Addresses, y.Addresses), cmp.Compare(x.Address, y.Address))
	})
	return out
}

// ranges writes addrs, sorted, with each run of consecutive addresses
// as "first-last".
func ranges(addrs []netip.Addr) []string {
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	var out []string
	for i := 0; i < len(addrs); {
		j := i
		for j+1 < len(addrs) && addrs[j].Next() == addrs[j+1] {
			j++
		}
		if j == i {
			out = append(out, addrs[i].String())
		} else {
			out = append(out, addrs[i].String()+"-"+addrs[j].String())
		}
		i = j + 1
	}
	return out
}
