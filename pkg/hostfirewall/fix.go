package hostfirewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Problems describe the dropped packets, one line each.
func (r *Report) Problems() []string {
	var out []string
	for _, f := range r.Dropped() {
		line := fmt.Sprintf("%s: dropped by %s", f.Packet.describe(), f.By)
		if f.Zone != "" {
			line += " (firewalld zone " + f.Zone + ")"
		}
		out = append(out, line)
	}
	return out
}

// Doubts describe the packets the check could not decide, one line each.
func (r *Report) Doubts() []string {
	var out []string
	for _, f := range r.Unsure() {
		line := f.Packet.describe() + ": could not tell; "
		if f.By != "" {
			line += "dropped by " + f.By + " unless "
		} else {
			line += "accepted unless "
		}
		out = append(out, line+"one of these rules decides otherwise: "+strings.Join(f.Unread, "; "))
	}
	return out
}

// describe names the packet with what the firewall sees of it.
func (p Packet) describe() string {
	s := fmt.Sprintf("%s (%s from %s to %s on %s)", p.What, strings.ToUpper(p.transport()), p.Src, netip.AddrPortFrom(p.Dst, p.Port), p.Iface)
	if p.Proto == ProtoVRRP {
		return fmt.Sprintf("%s (IP protocol %d from %s to %s on %s)", p.What, ProtoVRRP, p.Src, p.Dst, p.Iface)
	}
	if p.LocalPort != 0 {
		s = fmt.Sprintf("%s (TCP from %s to %s, redirected to local port %d, on %s)", p.What, p.Src, netip.AddrPortFrom(p.Dst, p.Port), p.LocalPort, p.Iface)
	}
	return s
}

// transport is nft's and firewall-cmd's name of a ported packet's
// protocol.
func (p Packet) transport() string {
	if p.Proto == ProtoUDP {
		return "udp"
	}
	return "tcp"
}

// Fix lists the commands that let the dropped packets in, in order:
// firewall-cmd's for firewalld (it rewrites its own table on reload, so a
// rule added with nft would not last), `nft insert rule` into the base
// chain that dropped them otherwise.
func (r *Report) Fix() []string {
	dropped := r.Dropped()
	if len(dropped) == 0 {
		return nil
	}
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if r.Firewalld {
		for _, f := range dropped {
			zone := ""
			if f.Zone != "" {
				zone = " --zone=" + f.Zone
			}
			if f.Packet.Proto == ProtoVRRP {
				add("firewall-cmd --permanent" + zone + " --add-protocol=vrrp")
			} else {
				add(fmt.Sprintf("firewall-cmd --permanent%s --add-port=%d/%s", zone, f.Port, f.Packet.transport()))
			}
		}
		return append(out, "firewall-cmd --reload")
	}
	for _, f := range dropped {
		p := f.Packet
		ip := "ip"
		if p.Dst.Is6() {
			ip = "ip6"
		}
		var match string
		if p.Proto == ProtoVRRP {
			match = fmt.Sprintf("%s saddr %s meta l4proto vrrp", ip, p.Src)
			if p.Dst.IsMulticast() {
				match = fmt.Sprintf("%s daddr %s meta l4proto vrrp", ip, p.Dst)
			}
		} else {
			match = fmt.Sprintf("%s dport %d", p.transport(), f.Port)
		}
		add(fmt.Sprintf("nft insert rule %s %s %s %s accept", f.Base.family, f.Base.table, f.Base.name, match))
	}
	return out
}
