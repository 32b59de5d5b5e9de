package onnode

// VIPLabel marks an IPv4 address as a VIP: the mark, with IPv6's below,
// by which every address vipctl or its keepalived puts on a node's
// interface (a VRRP VIP, a pool instance's anchor, a Service address,
// whether keepalived or the sidecar adds it) tells OVN-Kubernetes that it
// is not the node's own. OVN-Kubernetes picks the node's gateway
// addresses (k8s.ovn.org/node-primary-ifaddr, l3-gateway-config) from the
// addresses on br-ex and skips, in util.GetFilteredInterfaceAddrs, those
// whose label ends in "vip" (IsAddressAddedByKeepAlived) and those
// flagged secondary or deprecated. An unmarked VIP on br-ex can be taken
// for the node's address: a /32 beside the node's /24 is a primary
// address of its own, not a secondary one.
//
// IPv4: the label VIPLabel, as OpenShift's own keepalived.conf gives its
// API and ingress VIPs ("label vip", the MCO's on-prem templates since
// OCPBUGS-23432, 4.14 included; the earlier "<iface>:vip" broke
// interfaces of more than 11 characters, IFA_LABEL holding 15).
//
// IPv6 has no address labels (the kernel ignores IFA_LABEL there, and
// keepalived refuses "label" on an IPv6 address as a config error): the
// mark is the deprecated flag, a preferred lifetime of 0. keepalived
// gives it to every /128 VIP unless told otherwise (preferred_lft), so
// VIPs stay /128 in keepalived.conf, as OpenShift's VIPNetmask is 128
// for IPv6; the sidecar adds its IPv6 Service addresses as /128 with a
// preferred lifetime of 0 and an infinite valid one. A deprecated
// address still answers and may be a source when bound to; it is only
// not chosen as the source of new outgoing connections, which a VIP
// never should be.
const VIPLabel = "vip"
