package v1alpha1

import "testing"

// TestBGPAddressesRefused: a BGP peer must be a router the nodes can
// reach, and no pool, of any mode, may hold addresses no Service can be
// given (issue 47, class 5). A peer equal to a node's own address is
// checked with the node list (pkg/nodelist).
func TestBGPAddressesRefused(t *testing.T) {
	t.Parallel()
	peer := func(addr string) func(string) string {
		return replace("      - address: 203.0.113.1\n", "      - address: "+addr+"\n")
	}
	runParseErrors(t, bgpBase, exact([]parseErrorCase{
		{
			name: "a peer inside a bgp pool",
			edit: peer("203.0.113.200"),
			want: []string{`spec.bgp.peers[1].address: Invalid value: "203.0.113.200": inside spec.servicePools[1].addresses[0]: the pool's addresses are given to Services`},
		},
		{
			name: "a peer inside a vrrp pool",
			edit: peer("198.51.100.130"),
			want: []string{`spec.bgp.peers[1].address: Invalid value: "198.51.100.130": inside spec.servicePools[0].addresses[0]: the pool's addresses are given to Services`},
		},
		{
			name: "a peer on the API VIP and one on the ingress VIP",
			edit: func(s string) string {
				return peer("198.51.100.6")(replace("      - address: 198.51.100.1\n", "      - address: 198.51.100.5\n")(s))
			},
			want: []string{
				`spec.bgp.peers[0].address: Invalid value: "198.51.100.5": is spec.api.vips[0]: a VIP, not a router`,
				`spec.bgp.peers[1].address: Invalid value: "198.51.100.6": is spec.ingress[0].vips[0]: a VIP, not a router`,
			},
		},
		{
			name: "loopback, unspecified, multicast and limited broadcast peers",
			edit: func(s string) string {
				s = replace("      - address: 198.51.100.1\n", "      - address: 127.0.0.1\n")(s)
				s = peer("0.0.0.0")(s)
				s = replace("      - address: \"2001:db8::1\"\n", "      - address: \"ff02::2\"\n")(s)
				return s + "      - address: 255.255.255.255\n        asn: 64512\n"
			},
			want: []string{
				`spec.bgp.peers[0].address: Invalid value: "127.0.0.1": not a router's address: in 127.0.0.0/8, loopback (RFC 1122)`,
				`spec.bgp.peers[1].address: Invalid value: "0.0.0.0": not a router's address: in 0.0.0.0/8, "this network", the unspecified address among them (RFC 1122)`,
				`spec.bgp.peers[2].address: Invalid value: "ff02::2": not a router's address: in ff00::/8, multicast (RFC 4291)`,
				`spec.bgp.peers[3].address: Invalid value: "255.255.255.255": not a router's address: in 240.0.0.0/4, reserved, the limited broadcast address 255.255.255.255 among them (RFC 1112, RFC 919)`,
			},
		},
		{
			name: "a link-local IPv6 peer and a machine network's broadcast address",
			edit: func(s string) string {
				s = replace("      - address: \"2001:db8::1\"\n", "      - address: \"fe80::1\"\n")(s)
				return replace("      - address: 198.51.100.1\n", "      - address: 198.51.100.255\n")(s)
			},
			want: []string{
				`spec.bgp.peers[0].address: Invalid value: "198.51.100.255": is the broadcast address of machine network 198.51.100.0/24`,
				`spec.bgp.peers[2].address: Invalid value: "fe80::1": not a router's address: in fe80::/10, link-local (RFC 4291)`,
			},
		},
		{
			name: "bgp pools in multicast, loopback, link-local and reserved space",
			edit: replace(`addresses: [203.0.113.192/28, "2001:db8:f::/124"]`, `addresses: [224.0.0.0/28, 127.0.0.16/28, 169.254.1.0/28, 240.0.0.0/28, "ff05::/124", "::1/128"]`),
			want: []string{
				`spec.servicePools[1].addresses[0]: Invalid value: "224.0.0.0/28": overlaps 224.0.0.0/4, multicast (RFC 5771): no Service can be given such an address`,
				`spec.servicePools[1].addresses[1]: Invalid value: "127.0.0.16/28": overlaps 127.0.0.0/8, loopback (RFC 1122): no Service can be given such an address`,
				`spec.servicePools[1].addresses[2]: Invalid value: "169.254.1.0/28": overlaps 169.254.0.0/16, link-local (RFC 3927): no Service can be given such an address`,
				`spec.servicePools[1].addresses[3]: Invalid value: "240.0.0.0/28": overlaps 240.0.0.0/4, reserved, the limited broadcast address 255.255.255.255 among them (RFC 1112, RFC 919): no Service can be given such an address`,
				`spec.servicePools[1].addresses[4]: Invalid value: "ff05::/124": overlaps ff00::/8, multicast (RFC 4291): no Service can be given such an address`,
				`spec.servicePools[1].addresses[5]: Invalid value: "::1/128": overlaps ::1/128, loopback (RFC 4291): no Service can be given such an address`,
			},
		},
	}))
}

// TestSpecialPoolsEveryMode: a vrrp pool on its own interface (where the
// machine networks do not keep it out) and a range that only reaches into
// a special block are refused too; VIPs and the bootstrap host name the
// block they are in.
func TestSpecialPoolsEveryMode(t *testing.T) {
	t.Parallel()
	runParseErrors(t, base, exact([]parseErrorCase{
		{
			name: "a vrrp pool on a VLAN interface in loopback space",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: dmz\n      interface: bond0.100\n      addresses: [127.1.0.0/24]\n"),
			want: []string{`spec.servicePools[1].addresses[0]: Invalid value: "127.1.0.0/24": overlaps 127.0.0.0/8, loopback (RFC 1122): no Service can be given such an address`},
		},
		{
			name: "a range reaching into multicast space, on its own interface",
			edit: replace("      addresses: [198.51.100.128/26]\n", "      addresses: [198.51.100.128/26]\n    - name: edge\n      interface: bond0.100\n      addresses: [223.255.255.250-224.0.0.5]\n"),
			want: []string{`spec.servicePools[1].addresses[0]: Invalid value: "223.255.255.250-224.0.0.5": overlaps 224.0.0.0/4, multicast (RFC 5771): no Service can be given such an address`},
		},
		{
			name: "an ingress VIP in reserved space on its own interface",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [240.0.0.6]\n      interface: bond0.100\n"),
			want: []string{`spec.ingress[0].vips[0]: Invalid value: "240.0.0.6": not a usable unicast address: in 240.0.0.0/4, reserved, the limited broadcast address 255.255.255.255 among them (RFC 1112, RFC 919)`},
		},
	}))
}
