// Package dataplane is every kernel write vipctl makes on a node, over
// netlink and nftables, in the node's network namespace (host.Target):
//
//   - the API redirect (redirect.go): VIP:6443 to haproxy's port;
//   - the handover tables (handover.go) and the old master's local routes
//     and ARP settings (localvips.go, localroutes.go, arp.go): the two
//     halves of a move without reset connections, and Drain/Undrain;
//   - the IPv6 takeover routes (takeover.go): the new master's first SYN;
//   - the Service addresses of `announce: sidecar` pools (follow.go,
//     proxyndp.go): added with their anchor, announced, removed with it;
//   - reading the node's links and addresses (links.go), and its nftables
//     tables, vipctl's whole, for a support bundle (tables.go).
//
// Its rule: it is told what to hold (a onnode.Handover, a config's
// redirects) and makes the kernel match, changing only the difference; it
// reads no cluster object and renders nothing. Each write is testable on
// its own in a network namespace.
package dataplane
