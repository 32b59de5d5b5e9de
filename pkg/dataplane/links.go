package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vipctl/vipctl/pkg/host"
)

// LinkAddresses lists every address the current network namespace
// answers for: those on its interfaces and its IPv6 proxy neighbour
// entries (a pool's Service addresses, proxyndp.go).
func LinkAddresses() ([]netip.Addr, error) {
	return HandleAddresses(nil)
}

// HandleAddresses is LinkAddresses in the namespace of netlink handle h
// (nil: the current one).
func HandleAddresses(h *netlink.Handle) ([]netip.Addr, error) {
	if h == nil {
		h = &netlink.Handle{}
	}
	list, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	proxies, err := h.NeighProxyList(0, netlink.FAMILY_V6)
	if err != nil {
		return nil, fmt.Errorf("listing proxy neighbour entries: %w", err)
	}
	out := make([]netip.Addr, 0, len(list)+len(proxies))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	for _, n := range proxies {
		if ip, ok := netip.AddrFromSlice(n.IP); ok && n.Flags&netlink.NTF_PROXY != 0 {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// LocalInterface names the interface that holds an address inside
// network, as netlink handle h sees it (nil: the current namespace): the
// interface VRRP must speak on, whatever the node's NIC is called.
func LocalInterface(h *netlink.Handle, network netip.Prefix) (string, error) {
	var links []netlink.Link
	var err error
	if h == nil {
		links, err = netlink.LinkList()
	} else {
		links, err = h.LinkList()
	}
	if err != nil {
		return "", fmt.Errorf("listing links: %w", err)
	}
	for _, l := range links {
		var addrs []netlink.Addr
		if h == nil {
			addrs, err = netlink.AddrList(l, netlink.FAMILY_ALL)
		} else {
			addrs, err = h.AddrList(l, netlink.FAMILY_ALL)
		}
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && network.Contains(ip.Unmap()) {
				return l.Attrs().Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface has an address in %s", network)
}

// LinkNames lists the names of t's interfaces: the sidecar's own node is
// the one node whose interfaces are known for sure (a pool on an
// interface the node lacks leaves it out, onnode.MissingInterface).
func LinkNames(t host.Target) ([]string, error) {
	var names []string
	err := t.InNetns(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("listing links: %w", err)
		}
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return nil
	})
	return names, err
}

// inTarget runs fn with a netlink handle in t's network namespace (nil:
// the current one, a real node's).
func inTarget[T any](t host.Target, fn func(h *netlink.Handle) (T, error)) (out T, err error) {
	err = t.WithNetnsFd(func(fd int) error {
		var h *netlink.Handle
		if fd >= 0 {
			nh, err := netlink.NewHandleAt(netns.NsHandle(fd))
			if err != nil {
				return err
			}
			defer nh.Close()
			h = nh
		}
		out, err = fn(h)
		return err
	})
	return out, err
}

// TargetAddresses is HandleAddresses in t's network namespace.
func TargetAddresses(t host.Target) ([]netip.Addr, error) {
	return inTarget(t, HandleAddresses)
}

// TargetInterface is LocalInterface in t's network namespace.
func TargetInterface(t host.Target, network netip.Prefix) (string, error) {
	return inTarget(t, func(h *netlink.Handle) (string, error) { return LocalInterface(h, network) })
}
