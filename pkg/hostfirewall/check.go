package hostfirewall

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// IP protocol numbers of the packets checked.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoVRRP = 112
)

// Packet is one kind of traffic the host must receive.
type Packet struct {
	// What names it for people: "VRRP adverts from master-0".
	What     string
	Src, Dst netip.Addr
	// Proto is the IP protocol: ProtoVRRP, ProtoTCP or ProtoUDP.
	Proto uint8
	// Port is a TCP or UDP packet's destination port as sent (the API's
	// 6443, BFD's 3784).
	Port uint16
	// LocalPort, when set, is the port a redirect of vipctl's own turns
	// Port into at prerouting's dstnat priority (-100): the chains after
	// it see LocalPort, and the connection's ct status has dnat.
	LocalPort uint16
	// Iface is the interface it arrives on.
	Iface string
}

// Verdict is what the ruleset does with a packet.
type Verdict string

// Verdicts.
const (
	Accepted Verdict = "accepted"
	Dropped  Verdict = "dropped"
	// Unsure: a rule the check cannot read, on the packet's way, could
	// have changed the verdict the readable rules give (Finding.Unread).
	Unsure Verdict = "unsure"
)

// Finding is one packet's fate.
type Finding struct {
	Packet  Packet
	Verdict Verdict
	// By says what dropped it (or, when Unsure, what would drop it):
	// "rule 14 of chain inet firewalld filter_IN_public (reject)" or
	// "the policy drop of chain inet filter input".
	By string
	// Base is the base chain in which it was dropped, Zone the firewalld
	// zone whose chain dropped it ("" when none).
	Base ref
	Zone string
	// Port is a TCP or UDP packet's destination port as the dropping
	// chain saw it: LocalPort after vipctl's redirect.
	Port uint16
	// Unread names the rules it could not read that could have changed
	// the verdict.
	Unread []string
}

// Report is a check's findings, one per packet.
type Report struct {
	// Firewalld says the ruleset is firewalld's (table inet firewalld):
	// the fixes are firewall-cmd's, since firewalld rewrites its table.
	Firewalld bool
	Findings  []Finding
}

// Check walks each packet through the ruleset (`nft -j list ruleset`):
// the base chains of the prerouting and input hooks of its family, in
// priority order, as the kernel would for the first packet of a
// connection (ct state new). The tables whose name starts with
// skipPrefix are left out ("" for none): vipctl's own, which the caller
// replaces.
func Check(data []byte, packets []Packet, skipPrefix string) (*Report, error) {
	rs, err := parse(data)
	if err != nil {
		return nil, err
	}
	r := &Report{Firewalld: rs.tables[ref{"inet", "firewalld", ""}]}
	for _, p := range packets {
		r.Findings = append(r.Findings, rs.check(p, skipPrefix))
	}
	return r, nil
}

// Dropped are the findings whose packet is certainly dropped.
func (r *Report) Dropped() []Finding { return r.with(Dropped) }

// Unsure are the findings the check could not decide.
func (r *Report) Unsure() []Finding { return r.with(Unsure) }

func (r *Report) with(v Verdict) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Verdict == v {
			out = append(out, f)
		}
	}
	return out
}

// dstnatPriority is where vipctl's redirect sits (NF_IP_PRI_NAT_DST).
const dstnatPriority = -100

// unread is a rule whose matches could not all be read, with the
// verdict it would give.
type unread struct {
	where   string
	verdict string
}

func (rs *ruleset) check(p Packet, skip string) Finding {
	f := Finding{Packet: p, Verdict: Accepted}
	var unreads []unread
	for _, base := range rs.baseChains(p.Dst.Is6(), skip) {
		v := view{p: p}
		if p.LocalPort != 0 && (base.hook == "input" || base.prio > dstnatPriority) {
			v.redirected = true
		}
		w := &walk{rs: rs, v: v}
		verdict, by := w.run(base, 0)
		unreads = append(unreads, w.unread...)
		if verdict == "" {
			verdict, by = base.policy, "the policy "+base.policy+" of chain "+base.String()
		}
		if verdict == "drop" || verdict == "reject" {
			f.Verdict, f.By, f.Base, f.Zone, f.Port = Dropped, by, base.ref, w.zone, v.dport()
			break
		}
	}
	// A rule that could not be read casts doubt only where it could have
	// turned the verdict: an accepting one before a drop, a dropping one
	// on an accepted packet's way; a jump could do either.
	for _, u := range unreads {
		turns := u.verdict == "accept"
		if f.Verdict == Accepted {
			turns = u.verdict == "drop" || u.verdict == "reject"
		}
		if turns || u.verdict == "jump" || u.verdict == "goto" || u.verdict == "vmap" {
			f.Unread = append(f.Unread, u.where)
		}
	}
	if len(f.Unread) > 0 {
		if f.Verdict == Accepted {
			f.By = ""
		}
		f.Verdict = Unsure
	}
	return f
}

// view is the packet as a chain sees it.
type view struct {
	p Packet
	// redirected: vipctl's redirect has turned Port into LocalPort.
	redirected bool
}

func (v view) dport() uint16 {
	if v.redirected {
		return v.p.LocalPort
	}
	return v.p.Port
}

// maxDepth bounds jumps (nft allows 16 levels).
const maxDepth = 32

type walk struct {
	rs     *ruleset
	v      view
	unread []unread
	// zone is the last firewalld zone chain entered (filter_IN_<zone>).
	zone string
}

// run evaluates a chain: "accept", "drop" or "reject" with the rule that
// said so, or "" when the chain ended or returned.
func (w *walk) run(c *chain, depth int) (string, string) {
	if depth > maxDepth {
		return "", ""
	}
	if z, ok := strings.CutPrefix(c.name, "filter_IN_"); ok && c.table == "firewalld" && !strings.HasPrefix(z, "policy_") && !strings.Contains(z, "_") {
		w.zone = z
	}
	for _, r := range c.rules {
		where := fmt.Sprintf("rule %d of chain %s", r.handle, c.ref)
		verdict, target, sure := w.rule(c, r)
		if verdict == "" {
			continue
		}
		if !sure {
			w.unread = append(w.unread, unread{where: where + " (" + describe(r) + ")", verdict: verdict})
			continue
		}
		switch verdict {
		case "accept", "drop", "reject":
			return verdict, where + " (" + verdict + ")"
		case "return":
			return "", ""
		case "jump", "goto":
			next := w.rs.chains[ref{c.family, c.table, target}]
			if next == nil {
				continue
			}
			v, by := w.run(next, depth+1)
			if v != "" || verdict == "goto" {
				return v, by
			}
		}
	}
	return "", ""
}

// rule evaluates one rule: the verdict it gives the packet ("" when it
// does not apply, or gives none), a jump's or goto's target, and whether
// every match on the way could be read.
func (w *walk) rule(c *chain, r rule) (verdict, target string, sure bool) {
	sure = true
	for _, stmt := range r.expr {
		for kind, body := range stmt {
			switch kind {
			case "match":
				m, known := w.match(c, body)
				if !known {
					sure = false
					continue
				}
				if !m {
					return "", "", true
				}
			case "accept", "drop", "reject", "return", "continue":
				if kind == "continue" {
					return "", "", true
				}
				return kind, "", sure
			case "jump", "goto":
				var t struct{ Target string }
				if json.Unmarshal(body, &t) != nil {
					return kind, "", false
				}
				return kind, t.Target, sure
			case "vmap":
				v, t, known := w.vmap(c, body)
				if !known {
					return "vmap", "", false
				}
				if v == "" {
					return "", "", true
				}
				return v, t, sure
			case "counter", "log", "mangle", "notrack", "set", "ct helper", "meta", "ct", "dup", "fwd":
				// Statements that neither match nor decide.
			default:
				// limit, quota, xt, ...: a match the check cannot read.
				sure = false
			}
		}
	}
	return "", "", sure
}

// describe is a short account of a rule's statements for a message.
func describe(r rule) string {
	var kinds []string
	for _, stmt := range r.expr {
		for kind, body := range stmt {
			if kind == "match" {
				var m struct{ Left map[string]json.RawMessage }
				if json.Unmarshal(body, &m) == nil {
					for k := range m.Left {
						kind = "match " + k
					}
				}
			}
			if kind == "xt" {
				var x struct{ Type, Name string }
				if json.Unmarshal(body, &x) == nil {
					kind = "xt " + x.Type + " " + x.Name
				}
			}
			kinds = append(kinds, kind)
		}
	}
	return strings.Join(kinds, ", ")
}

func (w *walk) vmap(c *chain, body json.RawMessage) (verdict, target string, known bool) {
	var vm struct {
		Key  json.RawMessage
		Data json.RawMessage
	}
	if json.Unmarshal(body, &vm) != nil {
		return "", "", false
	}
	key, ok := w.value(vm.Key)
	if !ok {
		return "", "", false
	}
	if key.na {
		return "", "", true
	}
	elems, ok := w.elements(c, vm.Data)
	if !ok {
		return "", "", false
	}
	for _, e := range elems {
		var pair []json.RawMessage
		if json.Unmarshal(e, &pair) != nil || len(pair) != 2 {
			return "", "", false
		}
		m, ok := key.matches(unwrapElem(pair[0]))
		if !ok {
			return "", "", false
		}
		if !m {
			continue
		}
		var v map[string]json.RawMessage
		if json.Unmarshal(pair[1], &v) != nil {
			return "", "", false
		}
		for k, b := range v {
			var t struct{ Target string }
			_ = json.Unmarshal(b, &t)
			return k, t.Target, true
		}
	}
	return "", "", true
}

// match evaluates a match statement: whether it holds, and whether it
// could be read.
func (w *walk) match(c *chain, body json.RawMessage) (bool, bool) {
	var m struct {
		Op    string
		Left  json.RawMessage
		Right json.RawMessage
	}
	if json.Unmarshal(body, &m) != nil {
		return false, false
	}
	left, ok := w.value(m.Left)
	if !ok {
		return false, false
	}
	if left.na {
		// `tcp dport 22` on a VRRP packet: nft's implicit protocol
		// dependency fails, whatever the operator.
		return false, true
	}
	elems, ok := w.elements(c, m.Right)
	if !ok {
		return false, false
	}
	hit := false
	for _, e := range elems {
		h, ok := left.compare(m.Op, unwrapElem(e))
		if !ok {
			return false, false
		}
		hit = hit || h
	}
	if m.Op == "!=" {
		return !hit, true
	}
	return hit, true
}

// elements are a match's right-hand side as a list: a set's elements
// (anonymous or named), or the one value.
func (w *walk) elements(c *chain, right json.RawMessage) ([]json.RawMessage, bool) {
	var s string
	if json.Unmarshal(right, &s) == nil && strings.HasPrefix(s, "@") {
		elems, ok := w.rs.sets[ref{c.family, c.table, s[1:]}]
		return elems, ok
	}
	// A list: flags (`ct state established,related`).
	var flags []json.RawMessage
	if json.Unmarshal(right, &flags) == nil {
		return flags, true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(right, &obj) == nil {
		if set, ok := obj["set"]; ok {
			var list []json.RawMessage
			if json.Unmarshal(set, &list) == nil {
				return list, true
			}
			var one json.RawMessage
			if json.Unmarshal(set, &one) == nil {
				return []json.RawMessage{one}, true
			}
			return nil, false
		}
	}
	return []json.RawMessage{right}, true
}

// unwrapElem takes a set element's value out of {"elem": {"val": ...}}.
func unwrapElem(e json.RawMessage) json.RawMessage {
	var obj struct {
		Elem *struct{ Val json.RawMessage }
	}
	if json.Unmarshal(e, &obj) == nil && obj.Elem != nil {
		return obj.Elem.Val
	}
	return e
}

// multicastVRRP are VRRP's groups (vrrp.mode multicast).
var (
	MulticastVRRP4 = netip.MustParseAddr("224.0.0.18")
	MulticastVRRP6 = netip.MustParseAddr("ff02::12")
)
