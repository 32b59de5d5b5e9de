package vrid

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// NIC is one of this host's interfaces and its addresses.
type NIC struct {
	Name  string
	Addrs []netip.Prefix
}

func (n NIC) String() string {
	addrs := make([]string, len(n.Addrs))
	for i, a := range n.Addrs {
		addrs[i] = a.String()
	}
	return fmt.Sprintf("%s (%s)", n.Name, strings.Join(addrs, ", "))
}

// NICs lists this host's interfaces with a global unicast address, each
// with those addresses, loopback and link-local ones left out; with
// networks, only interfaces and addresses inside one of them.
func NICs(networks []netip.Prefix) ([]NIC, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []NIC
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		nic := NIC{Name: ifi.Name}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			addr, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !addr.Unmap().IsGlobalUnicast() {
				continue
			}
			ones, _ := ipn.Mask.Size()
			p := netip.PrefixFrom(addr.Unmap(), ones)
			if len(networks) > 0 && !inAny(p.Addr(), networks) {
				continue
			}
			nic.Addrs = append(nic.Addrs, p)
		}
		if len(nic.Addrs) > 0 {
			out = append(out, nic)
		}
	}
	return out, nil
}

func inAny(a netip.Addr, networks []netip.Prefix) bool {
	for _, n := range networks {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// OVNBridge is the bridge OVN-Kubernetes builds on every node at install
// time, out of the NIC that carries the node's address; keepalived runs
// on it once the cluster is up.
const OVNBridge = "br-ex"

// noInterface says, for --listen on an interface this host lacks, which
// of its interfaces to listen on instead: the one with an address in the
// machine networks, which is the NIC br-ex takes over on a node.
func noInterface(iface string, networks []netip.Prefix) error {
	var b strings.Builder
	fmt.Fprintf(&b, "this host has no interface %s", iface)
	if iface == OVNBridge {
		b.WriteString("; br-ex is the bridge OVN-Kubernetes builds on each node during installation, out of the NIC that carries the node's address in the machine network: before installing, listen on that NIC")
	}
	inNetwork, err := NICs(networks)
	if err != nil {
		return fmt.Errorf("%s (and listing the others failed: %w)", b.String(), err)
	}
	switch {
	case len(networks) == 0:
		all := nicList(inNetwork)
		if all == "" {
			all = "none"
		}
		fmt.Fprintf(&b, "; this host's interfaces with an address: %s (with -f cluster.yaml, the ones in the machine network are named)", all)
	case len(inNetwork) > 0:
		fmt.Fprintf(&b, "; here that is %s, with an address in the machine network", nicList(inNetwork))
	default:
		nets := make([]string, len(networks))
		for i, n := range networks {
			nets[i] = n.String()
		}
		all, _ := NICs(nil)
		others := nicList(all)
		if others == "" {
			others = "none"
		}
		fmt.Fprintf(&b, "; no interface of this host has an address in the machine network (%s): run it on a host of that network (this one has: %s)", strings.Join(nets, ", "), others)
	}
	return fmt.Errorf("%s", b.String())
}

func nicList(nics []NIC) string {
	parts := make([]string, len(nics))
	for i, n := range nics {
		parts[i] = n.String()
	}
	return strings.Join(parts, ", ")
}
