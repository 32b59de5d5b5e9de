// Package linklayer is what vipctl says and hears below IP: ARP requests
// (a node's gratuitous ARP when it takes addresses over, preflight's
// questions), IPv6 neighbour solicitations and advertisements, and the
// packet sockets they are heard on. One builder per message, so that what
// a node announces and what preflight asks are the bytes a kernel sends.
package linklayer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Broadcast is the Ethernet broadcast address.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ARPRequest is an Ethernet broadcast ARP request from mac: "who has
// target, tell sender". With sender equal to target it is a gratuitous
// ARP (keepalived's has targetMAC Broadcast), with sender 0.0.0.0 an ARP
// probe (RFC 5227); a question has a zero targetMAC.
func ARPRequest(mac net.HardwareAddr, sender, target netip.Addr, targetMAC net.HardwareAddr) []byte {
	b := make([]byte, 0, 42)
	b = append(b, Broadcast...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1) // Ethernet
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IP)
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, 1) // request
	s, t := sender.As4(), target.As4()
	b = append(b, mac...)
	b = append(b, s[:]...)
	if targetMAC == nil {
		targetMAC = make(net.HardwareAddr, 6)
	}
	b = append(b, targetMAC...)
	return append(b, t[:]...)
}

// NeighbourAdvertisement is the ICMPv6 message announcing a at mac,
// unsolicited, with the Override flag and the target link-layer address
// option (the checksum is left to the kernel's ICMPv6 socket).
func NeighbourAdvertisement(mac net.HardwareAddr, a netip.Addr) []byte {
	return neighbourMessage(136, 0x20, 2, mac, a)
}

// NeighbourSolicitation is the ICMPv6 message asking for a, with mac in
// the source link-layer address option (the checksum is the kernel's).
func NeighbourSolicitation(mac net.HardwareAddr, a netip.Addr) []byte {
	return neighbourMessage(135, 0, 1, mac, a)
}

func neighbourMessage(typ, flags, option byte, mac net.HardwareAddr, a netip.Addr) []byte {
	b := make([]byte, 0, 32)
	b = append(b, typ, 0, 0, 0)   // type, code, checksum
	b = append(b, flags, 0, 0, 0) // flags and reserved
	t := a.As16()
	b = append(b, t[:]...)
	b = append(b, option, 1) // a link-layer address option, 8 bytes
	return append(b, mac...)
}

// SolicitedNode is a's solicited-node multicast group (RFC 4291 2.7.1),
// where a neighbour solicitation for a goes.
func SolicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// PacketSocket opens a raw packet socket for every protocol, bound to
// ifi: it hears what arrives there and sends whole Ethernet frames. It
// needs CAP_NET_RAW.
func PacketSocket(ifi *net.Interface) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(Htons(unix.ETH_P_ALL)))
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return -1, fmt.Errorf("opening a packet socket needs CAP_NET_RAW (run as root): %w", err)
		}
		return -1, fmt.Errorf("opening a packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: Htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("binding to %s: %w", ifi.Name, err)
	}
	return fd, nil
}

// Htons is a 16-bit value in network byte order, as packet sockets take
// their protocol.
func Htons(v uint16) uint16 { return v<<8 | v>>8 }
