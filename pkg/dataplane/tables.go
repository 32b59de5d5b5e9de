package dataplane

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/vipctl/vipctl/pkg/host"
)

// Reading nftables back, for a support bundle (pkg/diagnose): the names of
// every table in the namespace, and vipctl's own tables whole. nft itself
// cannot be relied on for vipctl's: Debian bookworm's nft 1.0.6 (the one in
// vipctl's image) aborts on the handover table's rules ("payload_expr_complete:
// Assertion `desc->base == expr->payload.base' failed"), and with them on
// `nft list ruleset` does too.

// NFTable names one nftables table, its family as nft spells it.
type NFTable struct {
	Family string `json:"family"`
	Name   string `json:"name"`
}

// OwnTables are the tables vipctl writes: the API redirect's and the
// handover's, one per family.
func OwnTables() []NFTable {
	own := []NFTable{{Family: familyName(nftables.TableFamilyINet), Name: RedirectTable}}
	for _, f := range handoverFamilies {
		own = append(own, NFTable{Family: f.name, Name: HandoverTable})
	}
	return own
}

// TableDump is one table as the kernel holds it.
type TableDump struct {
	NFTable
	Chains []ChainDump `json:"chains"`
	Sets   []SetDump   `json:"sets"`
}

// ChainDump is a chain: its hook for a base chain, and its rules.
type ChainDump struct {
	Name     string     `json:"name"`
	Type     string     `json:"type,omitempty"`
	Hook     string     `json:"hook,omitempty"`
	Priority *int32     `json:"priority,omitempty"`
	Policy   string     `json:"policy,omitempty"`
	Rules    []RuleDump `json:"rules"`
}

// RuleDump is a rule by its handle and the kinds of its expressions, in
// order (meta, cmp, payload, lookup, …): what vipctl wrote is fixed by
// its version, so the handles and shapes tell whether it is all there.
type RuleDump struct {
	Handle uint64   `json:"handle"`
	Exprs  []string `json:"exprs"`
}

// SetDump is a set or map with its elements: the VIPs, peers and old
// masters of the handover, the hosts the internal API's guard lets in.
type SetDump struct {
	Name     string        `json:"name"`
	KeyType  string        `json:"keyType"`
	DataType string        `json:"dataType,omitempty"`
	Flags    []string      `json:"flags,omitempty"`
	Timeout  string        `json:"timeout,omitempty"`
	Elements []ElementDump `json:"elements"`
}

// ElementDump is one element: addresses as addresses, marks (vipctl's
// VRRP IDs) as numbers, anything else in hex.
type ElementDump struct {
	Key         string `json:"key"`
	Value       string `json:"value,omitempty"`
	IntervalEnd bool   `json:"intervalEnd,omitempty"`
	Expires     string `json:"expires,omitempty"`
}

// ListTables names every table in the target's network namespace,
// vipctl's and everyone else's.
func ListTables(t host.Target) ([]NFTable, error) {
	var out []NFTable
	err := withTables(t, func(_ *nftables.Conn, tables []*nftables.Table) error {
		for _, tb := range tables {
			out = append(out, NFTable{Family: familyName(tb.Family), Name: tb.Name})
		}
		return nil
	})
	return out, err
}

// ReadOwnTables reads vipctl's tables (OwnTables) that exist in the
// target's network namespace.
func ReadOwnTables(t host.Target) ([]TableDump, error) {
	out := []TableDump{}
	err := withTables(t, func(conn *nftables.Conn, tables []*nftables.Table) error {
		chains, err := conn.ListChains()
		if err != nil {
			return fmt.Errorf("nftables: listing chains: %w", err)
		}
		own := OwnTables()
		for _, tb := range tables {
			name := NFTable{Family: familyName(tb.Family), Name: tb.Name}
			if !slices.Contains(own, name) {
				continue
			}
			d, err := readTable(conn, tb, chains)
			if err != nil {
				return fmt.Errorf("nftables: table %s %s: %w", name.Family, name.Name, err)
			}
			d.NFTable = name
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// withTables calls fn with an nftables connection in the target's
// network namespace and the tables there.
func withTables(t host.Target, fn func(conn *nftables.Conn, tables []*nftables.Table) error) error {
	return t.WithNetnsFd(func(fd int) error {
		conn, err := nftConn(fd)
		if err != nil {
			return err
		}
		defer func() { _ = conn.CloseLasting() }()
		tables, err := conn.ListTables()
		if err != nil {
			return fmt.Errorf("nftables: listing tables: %w", err)
		}
		return fn(conn, tables)
	})
}

func readTable(conn *nftables.Conn, tb *nftables.Table, chains []*nftables.Chain) (TableDump, error) {
	d := TableDump{Chains: []ChainDump{}, Sets: []SetDump{}}
	for _, ch := range chains {
		if ch.Table.Name != tb.Name || ch.Table.Family != tb.Family {
			continue
		}
		c := ChainDump{Name: ch.Name, Type: string(ch.Type), Rules: []RuleDump{}}
		if ch.Hooknum != nil {
			c.Hook = hookName(tb.Family, *ch.Hooknum)
		}
		if ch.Priority != nil {
			c.Priority = (*int32)(ch.Priority)
		}
		if ch.Policy != nil {
			c.Policy = map[nftables.ChainPolicy]string{nftables.ChainPolicyAccept: "accept", nftables.ChainPolicyDrop: "drop"}[*ch.Policy]
		}
		rules, err := conn.GetRules(tb, ch)
		if err != nil {
			return d, fmt.Errorf("rules of chain %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			rd := RuleDump{Handle: r.Handle, Exprs: make([]string, 0, len(r.Exprs))}
			for _, e := range r.Exprs {
				rd.Exprs = append(rd.Exprs, strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", e), "*expr.")))
			}
			c.Rules = append(c.Rules, rd)
		}
		d.Chains = append(d.Chains, c)
	}
	sets, err := conn.GetSets(tb)
	if err != nil {
		return d, fmt.Errorf("sets: %w", err)
	}
	for _, s := range sets {
		if s.Anonymous {
			continue // a rule's own literal set, part of the rule
		}
		sd := SetDump{Name: s.Name, KeyType: s.KeyType.Name, DataType: s.DataType.Name, Elements: []ElementDump{}}
		for _, f := range []struct {
			on   bool
			name string
		}{{s.IsMap, "map"}, {s.Interval, "interval"}, {s.Constant, "constant"}, {s.Dynamic, "dynamic"}, {s.HasTimeout, "timeout"}} {
			if f.on {
				sd.Flags = append(sd.Flags, f.name)
			}
		}
		if s.Timeout > 0 {
			sd.Timeout = s.Timeout.String()
		}
		elements, err := conn.GetSetElements(s)
		if err != nil {
			return d, fmt.Errorf("elements of set %s: %w", s.Name, err)
		}
		for _, e := range elements {
			ed := ElementDump{Key: elementValue(s.KeyType, e.Key), IntervalEnd: e.IntervalEnd}
			if len(e.Val) > 0 {
				ed.Value = elementValue(s.DataType, e.Val)
			}
			if e.Expires > 0 {
				ed.Expires = e.Expires.String()
			}
			sd.Elements = append(sd.Elements, ed)
		}
		d.Sets = append(d.Sets, sd)
	}
	return d, nil
}

// elementValue shows a key or value by its set's type.
func elementValue(typ nftables.SetDatatype, b []byte) string {
	switch typ.Name {
	case nftables.TypeIPAddr.Name, nftables.TypeIP6Addr.Name:
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	case nftables.TypeMark.Name:
		if len(b) == 4 {
			return fmt.Sprint(binary.NativeEndian.Uint32(b)) // host order, as vridKey writes it
		}
	}
	return "0x" + hex.EncodeToString(b)
}

// hookName is a base chain's hook as nft spells it (the numbers of the
// ip, ip6 and inet families; others' as numbers).
func hookName(f nftables.TableFamily, h nftables.ChainHook) string {
	names := []string{"prerouting", "input", "forward", "output", "postrouting", "ingress"}
	if (f == nftables.TableFamilyINet || f == nftables.TableFamilyIPv4 || f == nftables.TableFamilyIPv6) && int(h) < len(names) {
		return names[h]
	}
	return fmt.Sprint(uint32(h))
}

// familyName is a table family as nft spells it.
func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family-%d", f)
}
