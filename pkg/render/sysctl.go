package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// SysctlFiles returns the node settings file, or nothing when no pool
// needs one. A vrrp pool with announce: sidecar and IPv6 addresses has
// its Service addresses answered by proxy neighbour entries instead of
// addresses on the interface (pkg/runtimecfg, proxyndp.go): the kernel
// answers for those only with forwarding on for the interface and
// proxy_ndp on, which the sidecar cannot set itself. A node whose
// vipctl.io/interface annotation names another interface needs the same
// lines for it; without them its sidecar puts the addresses on the
// interface, as it logs.
func SysctlFiles(c *v1alpha1.ClusterVIPs) []onnode.File {
	proxied := false
	for _, p := range cluster.CompilePools(c.Spec.ServicePools) {
		if p.SidecarAnnounced() && slices.ContainsFunc(p.Ranges, func(r v1alpha1.AddressRange) bool { return !r.Is4() }) {
			proxied = true
		}
	}
	if !proxied {
		return nil
	}
	iface := c.Spec.VRRP.Interface
	if iface == "" {
		iface = v1alpha1.DefaultInterface
	}
	var b strings.Builder
	b.WriteString(`# Written by vipctl. IPv6 Service addresses of pools with announce:
# sidecar are answered by proxy neighbour entries and local routes
# instead of addresses on the interface (thousands of IPv6 addresses take
# the kernel seconds to add on a failover; entries and routes take
# milliseconds). The kernel answers neighbour solicitations for proxy
# entries only with these two settings. An interface's forwarding is its
# host/router behaviour (all.forwarding, untouched, forwards); it marks this
# node's neighbour advertisements on the interface as a router's and,
# where the kernel handles router advertisements itself (accept_ra 1),
# stops that on the interface: set accept_ra to 2 there if it does.
# Without them the sidecar puts the addresses on the interface.
net.ipv6.conf.all.proxy_ndp = 1
`)
	// Slashes, so that an interface name with a dot (a VLAN) stays whole.
	fmt.Fprintf(&b, "net/ipv6/conf/%s/forwarding = 1\n", iface)
	fmt.Fprintf(&b, "# An answer for a proxy entry otherwise waits up to 0.8 s (the sidecar\n# also sets this).\nnet/ipv6/neigh/%s/proxy_delay = 0\n", iface)
	return []onnode.File{{Path: onnode.SysctlPath, Mode: configMode, Data: []byte(b.String())}}
}
