package vrid

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Key names a VRRP instance; v1alpha1.InstanceKey is the one definition.
type Key = v1alpha1.InstanceKey

// The keys whose IDs OpenShift computes.
const (
	KeyAPI     = v1alpha1.KeyAPI
	KeyIngress = v1alpha1.KeyIngress
)

// Request is what Assign needs.
type Request struct {
	Cluster string
	// Keys in declaration order.
	Keys []Key
	// Overrides pin IDs; they always win.
	Overrides map[Key]uint8
	// Avoid lists IDs never handed out (other routers on the LAN).
	Avoid []uint8
	// Optional keys (Local Services) get an ID after every key of Keys,
	// in order, as long as one is free; the rest are listed in
	// Assignment.Unassigned instead of failing the whole assignment: one
	// Service too many must not stop every other VIP's config.
	Optional []Key
	// OpenShiftKeepalived says OpenShift's own keepalived runs the
	// cluster's API and ingress instances (spec.mode poolsOnly): their
	// IDs (OpenShiftIDs) are on the LAN already, so no key gets them and
	// no override may pin them. They are listed in Assignment.OpenShift.
	OpenShiftKeepalived bool
}

// Entry is one instance's ID and where it came from.
type Entry struct {
	Key    Key    `json:"key"`
	ID     uint8  `json:"id"`
	Source string `json:"source"`
}

// Sources of an Entry's ID.
const (
	// SourceOpenShift: OpenShift's own ID for the key; vipctl's instance
	// uses it, or, in Assignment.OpenShift, OpenShift's own keepalived
	// does.
	SourceOpenShift = "openshift"
	SourceOverride  = "override"
	SourceDerived   = "derived"
)

// Assignment is the result of Assign, in Keys order.
type Assignment struct {
	Entries []Entry `json:"entries"`
	// Unassigned are the optional keys no ID was left for.
	Unassigned []Key `json:"unassigned,omitempty"`
	// OpenShift are the IDs OpenShift's own keepalived uses for the API
	// and ingress VIPs when Request.OpenShiftKeepalived is set: kept clear
	// of, not vipctl's.
	OpenShift []Entry `json:"openshift,omitempty"`
}

// ID returns the ID of key.
func (a Assignment) ID(key Key) (uint8, bool) {
	for _, e := range a.Entries {
		if e.Key == key {
			return e.ID, true
		}
	}
	return 0, false
}

const idSpace = 255

// Assign gives every key an ID under the package's contract.
func Assign(req Request) (Assignment, error) {
	if err := ValidateClusterName(req.Cluster); err != nil {
		return Assignment{}, err
	}
	b, err := newBooks(req)
	if err != nil {
		return Assignment{}, err
	}
	ids, err := b.fixed(req)
	if err != nil {
		return Assignment{}, err
	}
	for _, k := range req.Keys {
		if _, done := ids[k]; done {
			continue
		}
		id, ok := b.firstFree(req.Cluster, k)
		if !ok {
			return Assignment{}, fmt.Errorf("%s: all 255 VRRP IDs are taken or avoided", k)
		}
		b.taken[id] = k
		ids[k] = Entry{Key: k, ID: id, Source: SourceDerived}
	}
	out := Assignment{Entries: make([]Entry, 0, len(req.Keys)+len(req.Optional)), OpenShift: b.openshift}
	for _, k := range req.Keys {
		out.Entries = append(out.Entries, ids[k])
	}
	for _, k := range req.Optional {
		id, ok := b.firstFree(req.Cluster, k)
		if !ok {
			out.Unassigned = append(out.Unassigned, k)
			continue
		}
		b.taken[id] = k
		out.Entries = append(out.Entries, Entry{Key: k, ID: id, Source: SourceDerived})
	}
	return out, nil
}

// books is what Assign knows while it hands out IDs.
type books struct {
	// taken: each ID given so far and to which key; avoid: the IDs the
	// request keeps clear of; seen: every key the request names.
	taken map[uint8]Key
	avoid map[uint8]bool
	seen  map[Key]bool
	// openshift: the IDs OpenShift's own keepalived uses (poolsOnly).
	openshift []Entry
}

// newBooks checks the request's lists and takes its overrides: every
// error at once, in an order that reads the same every run.
func newBooks(req Request) (*books, error) {
	b := &books{taken: map[uint8]Key{}, avoid: map[uint8]bool{}, seen: map[Key]bool{}, openshift: openShiftKeepalived(req)}
	var errs []error
	for _, id := range req.Avoid {
		if id == 0 {
			errs = append(errs, errors.New("avoided ID 0 is not a VRRP ID (1-255)"))
		}
		b.avoid[id] = true
	}
	for _, k := range append(append([]Key{}, req.Keys...), req.Optional...) {
		if b.seen[k] {
			errs = append(errs, fmt.Errorf("key %s listed twice", k))
		}
		b.seen[k] = true
	}
	for _, e := range b.openshift {
		if b.seen[e.Key] {
			errs = append(errs, fmt.Errorf("key %s: OpenShift's own keepalived runs that instance", e.Key))
		}
	}
	// Overrides first, in sorted order so errors read the same every run.
	pinned := make([]Key, 0, len(req.Overrides))
	for k := range req.Overrides {
		pinned = append(pinned, k)
	}
	sort.Slice(pinned, func(i, j int) bool { return pinned[i] < pinned[j] })
	for _, k := range pinned {
		id := req.Overrides[k]
		switch {
		case !b.seen[k]:
			errs = append(errs, fmt.Errorf("override for unknown key %s", k))
		case id == 0:
			errs = append(errs, fmt.Errorf("override %s: ID 0 is not a VRRP ID (1-255)", k))
		case b.avoid[id]:
			errs = append(errs, fmt.Errorf("override %s: ID %d is also in the avoid list", k, id))
		case openShiftKeyFor(b.openshift, id) != "":
			errs = append(errs, fmt.Errorf("override %s: ID %d is OpenShift's %s ID, which its own keepalived uses on this LAN (mode poolsOnly)", k, id, openShiftKeyFor(b.openshift, id)))
		case b.taken[id] != "":
			errs = append(errs, fmt.Errorf("overrides %s and %s both pin ID %d", b.taken[id], k, id))
		default:
			b.taken[id] = k
		}
	}
	return b, errors.Join(errs...)
}

// fixed gives the IDs nobody derives: the overrides, and OpenShift's own
// API and ingress IDs where the request names those keys; OpenShift's
// keepalived's IDs are taken.
func (b *books) fixed(req Request) (map[Key]Entry, error) {
	ids := map[Key]Entry{}
	for k, id := range req.Overrides {
		ids[k] = Entry{Key: k, ID: id, Source: SourceOverride}
	}
	for _, e := range b.openshift {
		b.taken[e.ID] = e.Key
	}
	api, ingress := OpenShiftIDs(req.Cluster)
	var errs []error
	for _, fixed := range []struct {
		key Key
		id  uint8
	}{{KeyAPI, api}, {KeyIngress, ingress}} {
		if !b.seen[fixed.key] {
			continue
		}
		if _, pinnedKey := req.Overrides[fixed.key]; pinnedKey {
			continue
		}
		if b.avoid[fixed.id] {
			errs = append(errs, fmt.Errorf("%s: OpenShift's ID %d is in the avoid list; pin another with an override", fixed.key, fixed.id))
			continue
		}
		if other := b.taken[fixed.id]; other != "" {
			errs = append(errs, fmt.Errorf("%s: OpenShift's ID %d is pinned by the override for %s; pin %s too", fixed.key, fixed.id, other, fixed.key))
			continue
		}
		b.taken[fixed.id] = fixed.key
		ids[fixed.key] = Entry{Key: fixed.key, ID: fixed.id, Source: SourceOpenShift}
	}
	return ids, errors.Join(errs...)
}

// firstFree is the key's derived ID, or the next one neither taken nor
// avoided.
func (b *books) firstFree(cluster string, k Key) (uint8, bool) {
	return firstFree(cluster, k, func(id uint8) bool { return b.taken[id] == "" && !b.avoid[id] })
}

// openShiftKeepalived lists the IDs OpenShift's own keepalived uses for
// the cluster when the request says it runs (nil otherwise).
func openShiftKeepalived(req Request) []Entry {
	if !req.OpenShiftKeepalived {
		return nil
	}
	api, ingress := OpenShiftIDs(req.Cluster)
	return []Entry{{Key: KeyAPI, ID: api, Source: SourceOpenShift}, {Key: KeyIngress, ID: ingress, Source: SourceOpenShift}}
}

// openShiftKeyFor names the key of OpenShift's own keepalived that uses
// id, or "" when none does.
func openShiftKeyFor(entries []Entry, id uint8) Key {
	for _, e := range entries {
		if e.ID == id {
			return e.Key
		}
	}
	return ""
}

// firstFree walks key's probe sequence. The sequence is pseudo-random, so
// after a bounded number of probes it falls back to a scan to be sure to
// find the last free IDs.
func firstFree(cluster string, key Key, free func(uint8) bool) (uint8, bool) {
	for i := 0; i < 4*idSpace; i++ {
		if id := Candidate(cluster, key, i); free(id) {
			return id, true
		}
	}
	start := Candidate(cluster, key, 0)
	for off := 0; off < idSpace; off++ {
		id := uint8((int(start)-1+off)%idSpace + 1)
		if free(id) {
			return id, true
		}
	}
	return 0, false
}

// Candidate is the i-th ID of key's probe sequence (see the package doc).
func Candidate(cluster string, key Key, i int) uint8 {
	sum := sha256.Sum256([]byte(cluster + "/" + string(key) + "/" + strconv.Itoa(i)))
	return uint8(1 + binary.BigEndian.Uint32(sum[:4])%idSpace)
}
