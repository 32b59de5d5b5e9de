package vrid

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
)

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	protoVRRP     = 112
	vrrpAdvert    = 1
)

// ParseFrame decodes an Ethernet frame carrying a VRRP advertisement (v2 or
// v3, over IPv4 or IPv6, optionally 802.1Q tagged). ok is false for
// anything else, including truncated frames.
func ParseFrame(frame []byte) (Observation, bool) {
	a, ok := parseAdvert(frame)
	return a.Observation, ok
}

// Advert is one VRRP advertisement as a Tap hears it: its Observation and
// the addresses it carries (the sender's VIPs).
type Advert struct {
	Observation
	Addresses []netip.Addr
}

func parseAdvert(frame []byte) (Advert, bool) {
	obs, vrrp, ok := parseFrame(frame)
	if !ok {
		return Advert{}, false
	}
	a := Advert{Observation: obs}
	// Both versions list the addresses right after the 8-byte header
	// (VRRPv2's authentication data follows them).
	size := 4
	if obs.Family == "ipv6" {
		size = 16
	}
	for i, rest := 0, vrrp[8:]; i < int(vrrp[3]) && len(rest) >= size; i, rest = i+1, rest[size:] {
		addr, _ := netip.AddrFromSlice(rest[:size])
		a.Addresses = append(a.Addresses, addr)
	}
	return a, true
}

func parseFrame(frame []byte) (obs Observation, vrrp []byte, ok bool) {
	if len(frame) < 14 {
		return obs, nil, false
	}
	etherType := binary.BigEndian.Uint16(frame[12:14])
	payload := frame[14:]
	if etherType == etherTypeVLAN {
		if len(payload) < 4 {
			return obs, nil, false
		}
		etherType = binary.BigEndian.Uint16(payload[2:4])
		payload = payload[4:]
	}
	switch etherType {
	case etherTypeIPv4:
		if len(payload) < 20 || payload[0]>>4 != 4 {
			return obs, nil, false
		}
		ihl := int(payload[0]&0x0f) * 4
		if ihl < 20 || len(payload) < ihl || payload[9] != protoVRRP {
			return obs, nil, false
		}
		obs.Family = "ipv4"
		obs.Source = netip.AddrFrom4([4]byte(payload[12:16]))
		obs.Destination = netip.AddrFrom4([4]byte(payload[16:20]))
		vrrp = payload[ihl:]
	case etherTypeIPv6:
		// VRRP over IPv6 carries no extension headers (RFC 5798 sends it
		// with hop limit 255 straight after the fixed header).
		if len(payload) < 40 || payload[0]>>4 != 6 || payload[6] != protoVRRP {
			return obs, nil, false
		}
		obs.Family = "ipv6"
		obs.Source = netip.AddrFrom16([16]byte(payload[8:24]))
		obs.Destination = netip.AddrFrom16([16]byte(payload[24:40]))
		vrrp = payload[40:]
	default:
		return obs, nil, false
	}
	if len(vrrp) < 8 || vrrp[0]&0x0f != vrrpAdvert {
		return obs, nil, false
	}
	obs.Version = int(vrrp[0] >> 4)
	obs.ID = vrrp[1]
	obs.Priority = vrrp[2]
	switch obs.Version {
	case 2:
		obs.AdvertCentis = int(vrrp[5]) * 100
	case 3:
		obs.AdvertCentis = int(binary.BigEndian.Uint16(vrrp[4:6]) & 0x0fff)
	default:
		return Observation{}, nil, false
	}
	if obs.ID == 0 {
		return Observation{}, nil, false
	}
	return obs, vrrp, true
}

// dedupe keeps one observation per (ID, family, source), sorted.
func dedupe(in []Observation) []Observation {
	seen := map[string]bool{}
	var out []Observation
	for _, o := range in {
		k := fmt.Sprintf("%s/%s/%d", o.Family, o.Source, o.ID)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Source.Less(b.Source)
	})
	return out
}
