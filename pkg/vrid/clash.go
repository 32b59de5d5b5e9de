package vrid

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Inventory lists the other clusters on the LAN.
type Inventory struct {
	Clusters []KnownCluster `json:"clusters"`
}

// KnownCluster is another cluster, by name (its OpenShift IDs are
// computed) or with explicit IDs by instance label.
type KnownCluster struct {
	Name string           `json:"name"`
	IDs  map[string]uint8 `json:"ids,omitempty"`
}

// inventoryExample is the shape of an inventory, for messages.
const inventoryExample = "clusters: [{name: cnf10}, {name: lab, ids: {api: 10}}]"

// LoadInventory reads an inventory file, strictly: a misspelt field is an
// error rather than a silently ignored cluster, and a file that lists no
// cluster (empty, or another file given by mistake) is refused rather
// than reported as "no clash". Every problem at once.
func LoadInventory(path string) (Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Inventory{}, err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return Inventory{}, fmt.Errorf("%s: not valid YAML: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var inv Inventory
	// Decoded as the cluster file is: every unknown field with its path,
	// in the file's terms rather than the JSON's it is converted to.
	strict, err := kjson.UnmarshalStrict(js, &inv)
	if err != nil {
		return Inventory{}, fmt.Errorf("%s: not an inventory: %s; want, for example, %s", path, strings.TrimPrefix(err.Error(), "json: "), inventoryExample)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = strings.TrimPrefix(e.Error(), "json: ")
		}
		return Inventory{}, fmt.Errorf("%s: not an inventory: %s; want, for example, %s", path, strings.Join(msgs, ", "), inventoryExample)
	}
	if len(inv.Clusters) == 0 {
		return Inventory{}, fmt.Errorf("%s: clusters: Required value: no cluster; an inventory lists the other clusters on the LAN (%s), and one without any would check nothing", path, inventoryExample)
	}
	var errs []error
	seen := map[string]int{}
	for i, c := range inv.Clusters {
		if err := ValidateClusterName(c.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s: clusters[%d].name: %w", path, i, err))
		} else if first, dup := seen[c.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: clusters[%d].name: Duplicate value: %q (also clusters[%d])", path, i, c.Name, first))
		} else {
			seen[c.Name] = i
		}
		for _, label := range slices.Sorted(maps.Keys(c.IDs)) {
			if c.IDs[label] == 0 {
				errs = append(errs, fmt.Errorf("%s: clusters[%d].ids[%s]: 0 is not a VRRP ID (1-255)", path, i, label))
			}
		}
	}
	if len(errs) > 0 {
		return Inventory{}, errors.Join(errs...)
	}
	return inv, nil
}

// usedIDs lists what a known cluster uses, by label.
func (k KnownCluster) usedIDs() map[string]uint8 {
	if len(k.IDs) > 0 {
		return k.IDs
	}
	api, ingress := OpenShiftIDs(k.Name)
	return map[string]uint8{string(KeyAPI): api, string(KeyIngress): ingress}
}

// Where a clashing ID was found.
const (
	ClashKnown = "known"
	ClashLive  = "live"
)

// Clash is one of our IDs also in use elsewhere.
type Clash struct {
	ID           uint8  `json:"id"`
	Key          Key    `json:"key"`
	OtherCluster string `json:"otherCluster,omitempty"`
	OtherKey     string `json:"otherKey,omitempty"`
	Source       string `json:"source"`
	// Live sightings.
	Interface string      `json:"interface,omitempty"`
	Seen      Observation `json:"seen,omitempty"`
}

func (c Clash) String() string {
	var what string
	switch c.Key {
	case KeyAPI:
		what = fmt.Sprintf("APIVirtualRouterID %d", c.ID)
	case KeyIngress:
		what = fmt.Sprintf("IngressVirtualRouterID %d", c.ID)
	default:
		what = fmt.Sprintf("VirtualRouterID %d (%s)", c.ID, c.Key)
	}
	if c.Source == ClashLive {
		return fmt.Sprintf("clash: %s also seen live on %s from %s (VRRPv%d)", what, c.Interface, c.Seen.Source, c.Seen.Version)
	}
	return fmt.Sprintf("clash: %s also used by cluster %s (%s)", what, c.OtherCluster, c.OtherKey)
}

// FindClashes reports every ID of a that another cluster or a live router
// also uses, sorted by ID, then key, then who else.
func FindClashes(a Assignment, others []KnownCluster, live []Observation, iface string) []Clash {
	var out []Clash
	for _, e := range a.Entries {
		for _, o := range others {
			for label, id := range o.usedIDs() {
				if id == e.ID {
					out = append(out, Clash{ID: e.ID, Key: e.Key, OtherCluster: o.Name, OtherKey: label, Source: ClashKnown})
				}
			}
		}
		seen := map[string]bool{}
		for _, obs := range live {
			// IPv4 and IPv6 VRRP are separate ID spaces only in theory:
			// keepalived instances of one key share the ID across families,
			// so any family clashes.
			if obs.ID == e.ID && !seen[obs.Source.String()] {
				seen[obs.Source.String()] = true
				out = append(out, Clash{ID: e.ID, Key: e.Key, Source: ClashLive, Interface: iface, Seen: obs})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return strings.Compare(a.String(), b.String()) < 0
	})
	return out
}

// ProposeOverrides finds new IDs for the clashing keys, clear of every ID
// in taken, and returns overrides for just those keys: the rest keep
// theirs. The result is deterministic.
func ProposeOverrides(req Request, clashes []Clash, taken []uint8) (map[Key]uint8, error) {
	clashing := map[Key]bool{}
	for _, c := range clashes {
		clashing[c.Key] = true
	}
	current, err := Assign(req)
	if err != nil {
		return nil, err
	}
	// Keys that do not clash keep their IDs as pins, so re-assigning the
	// clashing ones cannot shuffle them.
	next := Request{Cluster: req.Cluster, Keys: req.Keys, Overrides: map[Key]uint8{}, Avoid: append([]uint8{}, req.Avoid...), OpenShiftKeepalived: req.OpenShiftKeepalived}
	for _, e := range current.Entries {
		if !clashing[e.Key] {
			next.Overrides[e.Key] = e.ID
		}
	}
	avoid := map[uint8]bool{}
	for _, id := range next.Avoid {
		avoid[id] = true
	}
	for _, e := range current.OpenShift {
		taken = append(taken, e.ID)
	}
	for _, id := range taken {
		if !avoid[id] && !pinned(next.Overrides, id) {
			avoid[id] = true
			next.Avoid = append(next.Avoid, id)
		}
	}
	// OpenShift's own IDs for api/ingress are what clashes; derive new ones.
	proposal := map[Key]uint8{}
	for _, k := range req.Keys {
		if !clashing[k] {
			continue
		}
		id, ok := firstFree(req.Cluster, k, func(id uint8) bool { return !avoid[id] && !pinned(next.Overrides, id) })
		if !ok {
			return nil, fmt.Errorf("%s: no free VRRP ID left", k)
		}
		next.Overrides[k] = id
		proposal[k] = id
	}
	return proposal, nil
}

func pinned(overrides map[Key]uint8, id uint8) bool {
	for _, v := range overrides {
		if v == id {
			return true
		}
	}
	return false
}
