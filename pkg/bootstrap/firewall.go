package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/hostfirewall"
	"github.com/vipctl/vipctl/pkg/render"
)

// firewallPackets are what the bootstrap host must receive from each
// control-plane node: its VRRP adverts (unicast to the bootstrap
// address of their family, or to VRRP's group), without which the host
// never sees a node take the VIP and the hand-over ends with two holders;
// and connections to the API VIPs' ports, which the redirect turns to
// haproxy's before the input chain sees them. With a routed API VIP also
// the BFD packets of each router it peers with (bfdPackets).
func (h *machine) firewallPackets() []hostfirewall.Packet {
	var out []hostfirewall.Packet
	iface := h.state.Bootstrap.Interface
	for _, own := range h.model.Bootstrap {
		dst := own
		if h.c.Spec.VRRP.Mode == v1alpha1.ModeMulticast {
			dst = hostfirewall.MulticastVRRP4
			if own.Is6() {
				dst = hostfirewall.MulticastVRRP6
			}
		}
		out = append(out, h.fromMasters(dst, func(m cluster.Node, src netip.Addr) hostfirewall.Packet {
			return hostfirewall.Packet{What: "VRRP adverts from " + m.Name, Src: src, Dst: dst, Proto: hostfirewall.ProtoVRRP, Iface: iface}
		})...)
	}
	for _, r := range render.APIRedirects(h.model) {
		out = append(out, h.fromMasters(r.VIP, func(m cluster.Node, src netip.Addr) hostfirewall.Packet {
			return hostfirewall.Packet{What: fmt.Sprintf("connections to port %d of the VIP from %s", r.From, m.Name),
				Src: src, Dst: r.VIP, Proto: hostfirewall.ProtoTCP, Port: r.From, LocalPort: r.To, Iface: iface}
		})...)
	}
	return append(out, h.bfdPackets()...)
}

// BFD's UDP ports (RFC 5881, RFC 5883), where a router sends its control
// packets whatever port they come from: each one starts a conntrack entry
// of its own, so none of them is a reply the host's own packets let in.
const (
	bfdPort         = 3784
	bfdMultihopPort = 4784
)

// bfdPackets are the BFD control packets the routers the bootstrap host
// peers with (a routed API VIP: spec.bootstrap.labels) send it, for each
// session with bfd on. Dropped, the session never comes up: BGP still
// does, but the routers notice the host gone only when the hold time
// ends, not within BFD's second. A session is multihop, as bgpd makes it,
// for an eBGP peer with ebgpMultihop and an iBGP peer outside the host's
// networks (FRR's PEER_IS_MULTIHOP).
func (h *machine) bfdPackets() []hostfirewall.Packet {
	if !h.c.Spec.API.Routed || h.c.Spec.Bootstrap == nil || h.c.Spec.BGP == nil {
		return nil
	}
	labels := h.c.Spec.Bootstrap.BootstrapLabels()
	var out []hostfirewall.Packet
	for _, peer := range h.model.BGPPeers {
		if !peer.BFD || peer.Unnumbered() || !v1alpha1.Matches(peer.NodeSelector, labels) {
			continue
		}
		i := slices.IndexFunc(h.model.Bootstrap, func(a netip.Addr) bool { return a.Is4() == peer.Addr.Is4() })
		if i < 0 {
			continue
		}
		own := h.model.Bootstrap[i]
		shared := slices.ContainsFunc(h.model.MachineNetworks, func(n netip.Prefix) bool { return n.Contains(own) && n.Contains(peer.Addr) })
		port := uint16(bfdPort)
		if peer.EBGPMultihop > 0 || (peer.ASN == h.c.Spec.BGP.ASN && !shared) {
			port = bfdMultihopPort
		}
		out = append(out, hostfirewall.Packet{What: "BFD packets from router " + peer.Addr.String(), Src: peer.Addr, Dst: own,
			Proto: hostfirewall.ProtoUDP, Port: port, Iface: h.state.Bootstrap.Interface})
	}
	return out
}

// fromMasters is one packet per control-plane node, sent from its first
// address of dst's family (none from a node without one).
func (h *machine) fromMasters(dst netip.Addr, packet func(m cluster.Node, src netip.Addr) hostfirewall.Packet) []hostfirewall.Packet {
	var out []hostfirewall.Packet
	for _, m := range h.masters {
		if i := slices.IndexFunc(m.Addresses, func(a netip.Addr) bool { return a.Is4() == dst.Is4() }); i >= 0 {
			out = append(out, packet(m, m.Addresses[i]))
		}
	}
	return out
}

// checkFirewall refuses to start when the host's own firewall certainly
// drops what the bootstrap host must receive, naming the commands that
// open it; it warns when it cannot tell, or cannot read the ruleset.
func (h *machine) checkFirewall(ctx context.Context) error {
	if h.o.SkipFirewallCheck {
		return nil
	}
	data, err := hostfirewall.Read(ctx, dataplane.RedirectTable)
	if err != nil {
		if errors.Is(err, hostfirewall.ErrNoNft) {
			h.log.Warn(err.Error())
		} else {
			h.log.Warn("the host's firewall was not checked", "err", err)
		}
		return nil
	}
	report, err := hostfirewall.Check(data, h.firewallPackets(), dataplane.RedirectTable)
	if err != nil {
		h.log.Warn("the host's firewall was not checked", "err", err)
		return nil
	}
	for _, d := range report.Doubts() {
		h.log.Warn("the host's firewall may drop what the bootstrap host must receive", "packet", d)
	}
	problems := report.Problems()
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the host's firewall drops what the bootstrap host must receive (docs/bootstrap.md, \"The host's firewall\"):\n  %s\nopen it with:\n  %s\nor start anyway with --skip-firewall-check",
		strings.Join(problems, "\n  "), strings.Join(report.Fix(), "\n  "))
}
