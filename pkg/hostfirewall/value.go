package hostfirewall

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// value is what an expression reads from the packet.
type value struct {
	// na: the expression does not apply to this packet (a TCP field of a
	// VRRP packet, an IPv4 address of an IPv6 one): the match fails.
	na    bool
	str   *string
	num   *uint64
	addr  *netip.Addr
	flags []string // ct state, ct status
}

func strVal(s string) value        { return value{str: &s} }
func numVal(n uint64) value        { return value{num: &n} }
func addrVal(a netip.Addr) value   { return value{addr: &a} }
func flagsVal(f ...string) value   { return value{flags: f} }
func notApplicable() (value, bool) { return value{na: true}, true }
func unknownValue() (value, bool)  { return value{}, false }
func known(v value) (value, bool)  { return v, true }
func (v view) family() string      { return map[bool]string{true: "ipv6", false: "ipv4"}[v.p.Dst.Is6()] }
func (v view) is(proto uint8) bool { return v.p.Proto == proto }
func (v view) multicast() bool     { return v.p.Dst.IsMulticast() }
func (v view) addrOf(f string) netip.Addr {
	if f == "saddr" {
		return v.p.Src
	}
	return v.p.Dst
}

// ported tells a packet with ports (TCP or UDP).
func (v view) ported() bool { return v.is(ProtoTCP) || v.is(ProtoUDP) }

// value reads a match's left-hand side from the packet; false when the
// check cannot tell.
func (w *walk) value(left json.RawMessage) (value, bool) {
	var e map[string]json.RawMessage
	if json.Unmarshal(left, &e) != nil {
		return unknownValue()
	}
	v := w.v
	for kind, body := range e {
		var x struct {
			Key, Protocol, Field, Dir, Result string
			Flags                             []string
		}
		if json.Unmarshal(body, &x) != nil {
			return unknownValue()
		}
		switch kind {
		case "meta":
			switch x.Key {
			case "iifname":
				return known(strVal(v.p.Iface))
			case "l4proto":
				return known(numVal(uint64(v.p.Proto)))
			case "nfproto":
				return known(strVal(v.family()))
			case "protocol":
				return known(strVal(map[bool]string{true: "ip6", false: "ip"}[v.p.Dst.Is6()]))
			case "pkttype":
				if v.multicast() {
					return known(strVal("multicast"))
				}
				return known(strVal("host"))
			}
		case "payload":
			return w.payload(x.Protocol, x.Field)
		case "ct":
			switch {
			case x.Key == "state":
				return known(flagsVal("new"))
			case x.Key == "status":
				if v.redirected {
					return known(flagsVal("dnat"))
				}
				return known(flagsVal())
			case x.Key == "l3proto":
				return known(strVal(v.family()))
			case x.Key == "protocol":
				return known(numVal(uint64(v.p.Proto)))
			case x.Key == "direction":
				return known(strVal("original"))
			case x.Key == "proto-dst" && x.Dir == "original" && v.ported():
				return known(numVal(uint64(v.p.Port)))
			}
		case "fib":
			// The reverse-path filter (`fib saddr . iif oif missing
			// drop`): the senders are hosts of the segment the packet
			// arrives on, so the way back exists.
			if x.Result == "oif" || x.Result == "oifname" {
				if slices.Contains(x.Flags, "saddr") {
					return known(strVal("exists"))
				}
			}
			if x.Result == "type" && slices.Equal(x.Flags, []string{"daddr"}) {
				if v.multicast() {
					return known(strVal("multicast"))
				}
				return known(strVal("local"))
			}
		}
		return unknownValue()
	}
	return unknownValue()
}

func (w *walk) payload(proto, field string) (value, bool) {
	v := w.v
	switch proto {
	case "ip", "ip6":
		if (proto == "ip6") != v.p.Dst.Is6() {
			return notApplicable()
		}
		switch field {
		case "saddr", "daddr":
			return known(addrVal(v.addrOf(field)))
		case "protocol", "nexthdr":
			return known(numVal(uint64(v.p.Proto)))
		}
	case "tcp", "udp":
		if !v.is(uint8(protocols[proto])) {
			return notApplicable()
		}
		if field == "dport" {
			return known(numVal(uint64(v.dport())))
		}
	case "th":
		if v.ported() && field == "dport" {
			return known(numVal(uint64(v.dport())))
		}
	case "udplite", "sctp", "dccp", "icmp", "icmpv6", "igmp", "esp", "ah", "comp":
		return notApplicable()
	}
	return unknownValue()
}

// protocols are the names nft prints for IP protocols.
var protocols = map[string]uint64{
	"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "ipv6-icmp": 58, "icmpv6": 58,
	"gre": 47, "esp": 50, "ah": 51, "sctp": 132, "udplite": 136, "vrrp": ProtoVRRP,
	"ospf": 89, "pim": 103, "dccp": 33, "comp": 108,
}

// matches tells whether the value is the element (a vmap key).
func (v value) matches(el json.RawMessage) (bool, bool) { return v.compare("==", el) }

// compare applies op ("==", "!=" and "in" compare for equality: the caller
// negates "!="; "<" and the like for numbers) to the value and one element
// of the right-hand side: a value, a prefix or a range.
func (v value) compare(op string, el json.RawMessage) (bool, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(el, &obj) == nil {
		if p, ok := obj["prefix"]; ok {
			var pre struct {
				Addr string
				Len  int
			}
			if v.addr == nil || json.Unmarshal(p, &pre) != nil {
				return false, false
			}
			a, err := netip.ParseAddr(pre.Addr)
			if err != nil {
				return false, false
			}
			n, err := a.Prefix(pre.Len)
			if err != nil {
				return false, false
			}
			return n.Contains(*v.addr), true
		}
		if r, ok := obj["range"]; ok {
			var bounds []json.RawMessage
			if json.Unmarshal(r, &bounds) != nil || len(bounds) != 2 {
				return false, false
			}
			lo, ok1 := v.order(bounds[0])
			hi, ok2 := v.order(bounds[1])
			if !ok1 || !ok2 {
				return false, false
			}
			return lo <= 0 && hi >= 0, true
		}
		return false, false
	}
	switch op {
	case "", "==", "!=", "in":
	case "<", ">", "<=", ">=":
		c, ok := v.order(el)
		if !ok {
			return false, false
		}
		// c compares the element with the value: "value < el" is c > 0.
		return map[string]bool{"<": c > 0, ">": c < 0, "<=": c >= 0, ">=": c <= 0}[op], true
	default:
		return false, false
	}
	if v.flags != nil || (v.str == nil && v.num == nil && v.addr == nil) {
		var s string
		if json.Unmarshal(el, &s) != nil {
			return false, false
		}
		return slices.Contains(v.flags, s), true
	}
	if v.str != nil {
		var s string
		if json.Unmarshal(el, &s) != nil {
			return false, false
		}
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			return strings.HasPrefix(*v.str, prefix), true
		}
		return *v.str == s, true
	}
	c, ok := v.order(el)
	return c == 0, ok
}

// order compares an element with a number or address value: -1 when the
// element is lower, 0 equal, 1 higher.
func (v value) order(el json.RawMessage) (int, bool) {
	var s string
	var n uint64
	switch {
	case v.num != nil && json.Unmarshal(el, &n) == nil:
	case v.num != nil && json.Unmarshal(el, &s) == nil:
		p, ok := protocols[s]
		if !ok {
			if parsed, err := strconv.ParseUint(s, 10, 64); err == nil {
				p, ok = parsed, true
			}
		}
		if !ok {
			// A service name (`tcp dport ssh`): not known here.
			return 0, false
		}
		n = p
	case v.addr != nil && json.Unmarshal(el, &s) == nil:
		a, err := netip.ParseAddr(s)
		if err != nil {
			return 0, false
		}
		return a.Compare(*v.addr), true
	default:
		return 0, false
	}
	switch {
	case n < *v.num:
		return -1, true
	case n > *v.num:
		return 1, true
	}
	return 0, true
}
