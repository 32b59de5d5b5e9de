package sidecar

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vipctl/pkg/vrid"
)

const (
	// DefaultClashProposeAfter is how long a router outside the cluster
	// must keep advertising one of the cluster's VRRP IDs before the
	// sidecar proposes another ID for it (Options.ClashProposeAfter):
	// long enough that a router brought up by mistake and taken down
	// again, or a lab test, proposes nothing.
	DefaultClashProposeAfter = 5 * time.Minute
	// lanWindow is how long an ID heard on the segment counts as in use
	// there: a router that advertises at all does so every few seconds.
	lanWindow = 30 * time.Minute
	// clashGap ends a clash: a foreign router silent this long has left
	// the ID, and its time starts again if it comes back.
	clashGap = time.Minute
	// ReasonVRRPIDProposed is the Node Event's reason.
	ReasonVRRPIDProposed = "VRRPIDProposed"
)

// clashes follows, under foreignRouters' lock, every VRRP ID heard on the
// segment and how long a router outside the cluster has used one of the
// cluster's, and proposes an ID free of both for the instances of an ID
// clashing longer than after: the admin's pin in
// spec.vrrp.virtualRouterIDs, applied by vipctl update, moves them.
type clashes struct {
	after time.Duration
	// req is the cluster's ID request as of the last render (the keys
	// the file pins); zero before it.
	req vrid.Request
	// heard is when each ID was last heard on the segment, anyone's.
	heard map[uint8]time.Time
	// since and last are when a foreign router was first and last heard
	// on each of the cluster's IDs, for as long as it keeps at it.
	since, last map[uint8]time.Time
	// said is each lasting clash's proposal, made once per clash.
	said     map[uint8]string
	proposed *prometheus.GaugeVec
	// events gates each clashing ID's Event.
	events *eventGate[uint8]
}

func newClashes(after time.Duration, proposed *prometheus.GaugeVec) *clashes {
	if after <= 0 {
		after = DefaultClashProposeAfter
	}
	return &clashes{after: after, proposed: proposed, heard: map[uint8]time.Time{}, since: map[uint8]time.Time{}, last: map[uint8]time.Time{}, said: map[uint8]string{},
		events: newEventGate[uint8](foreignEventEvery, foreignSeriesMax)}
}

// advert takes any advert heard, and ends the clashes whose foreign
// router has gone quiet.
func (c *clashes) advert(id uint8, now time.Time) {
	c.heard[id] = now
	for clashID, last := range c.last {
		if now.Sub(last) < clashGap {
			continue
		}
		delete(c.since, clashID)
		delete(c.last, clashID)
		delete(c.said, clashID)
		c.proposed.DeletePartialMatch(prometheus.Labels{"vrid": strconv.Itoa(int(clashID))})
	}
}

// foreign takes an advert of one of the cluster's IDs from outside it,
// keys being the instances of the ID; once the clash has lasted, it
// proposes (once per clash) and returns the Event's message when one is
// due, "" otherwise.
func (c *clashes) foreign(id uint8, keys []string, source string, iface string, now time.Time) string {
	if _, ok := c.since[id]; !ok {
		c.since[id] = now
	}
	c.last[id] = now
	if now.Sub(c.since[id]) < c.after {
		return ""
	}
	msg, ok := c.said[id]
	if !ok {
		msg = c.propose(id, keys, source, iface, now)
		c.said[id] = msg
	}
	if !c.events.allow(id, now) {
		return ""
	}
	return msg
}

// propose finds an ID for the instances of id, sets their series and
// says what to do.
func (c *clashes) propose(id uint8, keys []string, source string, iface string, now time.Time) string {
	var clashing []vrid.Clash
	for _, k := range keys {
		// Only what the file names can be pinned: a Local Service's
		// instance takes the next free ID on its own.
		if slices.Contains(c.req.Keys, vrid.Key(k)) {
			clashing = append(clashing, vrid.Clash{ID: id, Key: vrid.Key(k)})
		}
	}
	inUse := c.inUse(now)
	if len(clashing) == 0 {
		return fmt.Sprintf("VRRP ID %d of this cluster (%s) has been advertised by %s, a router outside the cluster, for more than %s; its instances take their IDs at run time and cannot be pinned: have the router's owner move it (IDs heard on %s in the last %s: %s)",
			id, strings.Join(keys, ", "), source, c.after, iface, lanWindow, joinIDs(inUse))
	}
	proposal, err := vrid.ProposeOverrides(c.req, clashing, inUse)
	if err != nil {
		return fmt.Sprintf("VRRP ID %d of this cluster (%s) has been advertised by %s, a router outside the cluster, for more than %s, and no other ID is free: %v", id, strings.Join(keys, ", "), source, c.after, err)
	}
	var pins []string
	for _, k := range slices.Sorted(maps.Keys(proposal)) {
		pins = append(pins, fmt.Sprintf("%s: %d", k, proposal[k]))
		c.proposed.WithLabelValues(string(k), strconv.Itoa(int(id))).Set(float64(proposal[k]))
	}
	return fmt.Sprintf("VRRP ID %d of this cluster (%s) has been advertised by %s, a router outside the cluster, for more than %s. Free on %s as far as this node has heard (IDs heard there in the last %s: %s), and clear of this cluster's other IDs: pin spec.vrrp.virtualRouterIDs {%s} in the cluster file and run vipctl update (docs/vr-ids.md, \"A clash on a running cluster\")",
		id, strings.Join(keys, ", "), source, c.after, iface, lanWindow, joinIDs(inUse), strings.Join(pins, ", "))
}

// inUse lists the IDs heard on the segment within lanWindow, forgetting
// the older ones.
func (c *clashes) inUse(now time.Time) []uint8 {
	var ids []uint8
	for id, at := range c.heard {
		if now.Sub(at) >= lanWindow {
			delete(c.heard, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func joinIDs(ids []uint8) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ", ")
}
