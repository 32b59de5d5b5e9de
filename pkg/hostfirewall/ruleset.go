// Package hostfirewall tells whether a host's own firewall lets in what a
// vipctl process on it must receive from other hosts, before it starts
// (`vipctl bootstrap`, docs/bootstrap.md "The host's firewall"), and
// which commands open it.
//
// The judge is the kernel's nftables ruleset as `nft -j list ruleset`
// prints it: firewalld (whose nftables backend is the default on RHEL 8
// and later), nftables.service and iptables-nft all end up there, and
// `nft` is in vipctl's image while firewalld's D-Bus is not. Check walks
// each packet through the ruleset's prerouting and input base chains as
// the kernel would, for the expressions those rulesets use; a rule it
// cannot read (an xtables match, a concatenation, ...) that could have
// changed the verdict makes the verdict Unsure rather than a guess.
package hostfirewall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Read returns the ruleset of the current network namespace as `nft -j
// list ruleset` prints it, without the tables whose name starts with
// skipPrefix (vipctl's own, which the caller replaces: Debian's nft 1.0.6
// aborts on vipctl's handover tables, and would on the whole listing).
// ErrNoNft says there is no nft to ask.
func Read(ctx context.Context, skipPrefix string) ([]byte, error) {
	path, err := exec.LookPath("nft")
	if err != nil {
		return nil, ErrNoNft
	}
	nft := func(args ...string) ([]json.RawMessage, error) {
		out, err := exec.CommandContext(ctx, path, append([]string{"-j"}, args...)...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && len(ee.Stderr) > 0 {
				return nil, fmt.Errorf("nft -j %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
			}
			return nil, fmt.Errorf("nft -j %s: %w", strings.Join(args, " "), err)
		}
		var l struct{ Nftables []json.RawMessage }
		if err := json.Unmarshal(out, &l); err != nil {
			return nil, fmt.Errorf("nft -j %s: %w", strings.Join(args, " "), err)
		}
		return l.Nftables, nil
	}
	tables, err := nft("list", "tables")
	if err != nil {
		return nil, err
	}
	var all []json.RawMessage
	for _, e := range tables {
		var t struct {
			Table *struct{ Family, Name string }
		}
		if json.Unmarshal(e, &t) != nil || t.Table == nil {
			continue
		}
		if skipPrefix != "" && strings.HasPrefix(t.Table.Name, skipPrefix) {
			continue
		}
		entries, err := nft("list", "table", t.Table.Family, t.Table.Name)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
	}
	return json.Marshal(map[string][]json.RawMessage{"nftables": all})
}

// ErrNoNft is Read's error when nft is not installed.
var ErrNoNft = errors.New("nft not found in PATH: the host's firewall was not checked")

// ref names a chain or set: its table's family and name, and its own.
type ref struct{ family, table, name string }

func (r ref) String() string { return r.family + " " + r.table + " " + r.name }

type chain struct {
	ref
	typ, hook, policy string
	prio              int
	rules             []rule
}

type rule struct {
	handle int
	expr   []map[string]json.RawMessage
}

// ruleset is the parsed listing.
type ruleset struct {
	chains map[ref]*chain
	sets   map[ref][]json.RawMessage
	tables map[ref]bool // name only: ref{family, name, ""}
}

type listing struct {
	Nftables []struct {
		Table *struct {
			Family, Name string
		} `json:"table"`
		Chain *struct {
			Family, Table, Name, Type, Hook, Policy string
			Prio                                    json.RawMessage
		} `json:"chain"`
		Rule *struct {
			Family, Table, Chain string
			Handle               int
			Expr                 []map[string]json.RawMessage
		} `json:"rule"`
		Set *setEntry `json:"set"`
		Map *setEntry `json:"map"`
	} `json:"nftables"`
}

type setEntry struct {
	Family, Table, Name string
	Elem                []json.RawMessage
}

// namedPriorities are nft's names of the standard priorities, as older
// releases print them in JSON.
var namedPriorities = map[string]int{"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}

func parse(data []byte) (*ruleset, error) {
	var l listing
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("the nftables ruleset (nft -j list ruleset): %w", err)
	}
	rs := &ruleset{chains: map[ref]*chain{}, sets: map[ref][]json.RawMessage{}, tables: map[ref]bool{}}
	for _, e := range l.Nftables {
		switch {
		case e.Table != nil:
			rs.tables[ref{e.Table.Family, e.Table.Name, ""}] = true
		case e.Chain != nil:
			c := e.Chain
			ch := &chain{ref: ref{c.Family, c.Table, c.Name}, typ: c.Type, hook: c.Hook, policy: c.Policy}
			if len(c.Prio) > 0 {
				var n int
				var s string
				switch {
				case json.Unmarshal(c.Prio, &n) == nil:
					ch.prio = n
				case json.Unmarshal(c.Prio, &s) == nil:
					ch.prio = namedPriorities[s]
				}
			}
			rs.chains[ch.ref] = ch
		case e.Rule != nil:
			r := e.Rule
			ch := rs.chains[ref{r.Family, r.Table, r.Chain}]
			if ch == nil {
				return nil, fmt.Errorf("the nftables ruleset: rule %d of chain %s %s %s listed before its chain", r.Handle, r.Family, r.Table, r.Chain)
			}
			ch.rules = append(ch.rules, rule{handle: r.Handle, expr: r.Expr})
		case e.Set != nil:
			rs.sets[ref{e.Set.Family, e.Set.Table, e.Set.Name}] = e.Set.Elem
		case e.Map != nil:
			rs.sets[ref{e.Map.Family, e.Map.Table, e.Map.Name}] = e.Map.Elem
		}
	}
	return rs, nil
}

// hookOrder is where each hook a received packet passes sits.
var hookOrder = map[string]int{"prerouting": 0, "input": 1}

// baseChains are the chains a packet of this family passes on its way
// in, in the kernel's order: prerouting before input, by priority. The
// tables whose name starts with skipPrefix (vipctl's own) are left out:
// the run replaces them.
func (rs *ruleset) baseChains(v6 bool, skipPrefix string) []*chain {
	var out []*chain
	for _, c := range rs.chains {
		if _, ok := hookOrder[c.hook]; !ok || skipPrefix != "" && strings.HasPrefix(c.table, skipPrefix) {
			continue
		}
		switch c.family {
		case "inet":
		case "ip":
			if v6 {
				continue
			}
		case "ip6":
			if !v6 {
				continue
			}
		default: // netdev, bridge, arp: not on the IP input path
			continue
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if hookOrder[out[i].hook] != hookOrder[out[j].hook] {
			return hookOrder[out[i].hook] < hookOrder[out[j].hook]
		}
		if out[i].prio != out[j].prio {
			return out[i].prio < out[j].prio
		}
		return out[i].String() < out[j].String()
	})
	return out
}
