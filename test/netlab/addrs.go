package netlab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// Addr is one address on an interface as `ip -j -d addr show` reports
// it: what OVN-Kubernetes reads over netlink when it picks a node's
// addresses.
type Addr struct {
	Addr      netip.Addr
	PrefixLen int
	// Label is the IPv4 address label (IFA_LABEL); IPv6 has none.
	Label string
	// Deprecated: an IPv6 address whose preferred lifetime ran out
	// (IFA_F_DEPRECATED).
	Deprecated bool
	// Preferred and Valid are the lifetimes in seconds (0xffffffff:
	// forever).
	Preferred, Valid uint32
}

func (a Addr) String() string {
	s := fmt.Sprintf("%s/%d", a.Addr, a.PrefixLen)
	if a.Label != "" {
		s += " label " + a.Label
	}
	if a.Deprecated {
		s += " deprecated"
	}
	return s + fmt.Sprintf(" preferred %d valid %d", a.Preferred, a.Valid)
}

// MarkedNotNodes tells whether OVN-Kubernetes leaves a out when it picks
// the node's own addresses from an interface (util.GetFilteredInterfaceAddrs
// in ovn-kubernetes' go-controller): an IPv4 address whose label ends in
// "vip" (IsAddressAddedByKeepAlived), or an address flagged deprecated.
// (Secondary addresses are left out too; a VIP of /32 or /128 never is one.)
func (a Addr) MarkedNotNodes() bool {
	return (a.Addr.Is4() && strings.HasSuffix(a.Label, "vip")) || a.Deprecated
}

// Addrs lists the global addresses on dev, read with `ip -j -d addr`.
func (h *Host) Addrs(dev string) ([]Addr, error) {
	out, err := h.Exec("ip", "-j", "-d", "addr", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local      string `json:"local"`
			PrefixLen  int    `json:"prefixlen"`
			Scope      string `json:"scope"`
			Label      string `json:"label"`
			Deprecated bool   `json:"deprecated"`
			Preferred  uint32 `json:"preferred_life_time"`
			Valid      uint32 `json:"valid_life_time"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -j addr show dev %s: %w", dev, err)
	}
	var addrs []Addr
	for _, l := range links {
		for _, ai := range l.AddrInfo {
			if ai.Scope != "global" {
				continue
			}
			a, err := netip.ParseAddr(ai.Local)
			if err != nil {
				return nil, fmt.Errorf("ip addr show dev %s: %w", dev, err)
			}
			addrs = append(addrs, Addr{Addr: a, PrefixLen: ai.PrefixLen, Label: ai.Label, Deprecated: ai.Deprecated, Preferred: ai.Preferred, Valid: ai.Valid})
		}
	}
	return addrs, nil
}
