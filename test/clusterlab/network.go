package clusterlab

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// cniBinDir is where Debian's containernetworking-plugins installs the
// plugins; containerd's CRI config names it (kubeletlab).
const cniBinDir = "/usr/lib/cni"

// cniConfigPath is the node's CNI network, which containerd reads.
const cniConfigPath = "/etc/cni/net.d/10-lab.conflist"

// nodeSysctls are a node's own network settings besides the lab's: it
// forwards between its uplink and its pods' bridge.
var nodeSysctls = []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"}

// hostGWRoutes route every other node's pod ranges to that node's
// address: host-gw, what flannel's backend of that name installs.
func hostGWRoutes(self NodeSpec) []string {
	var out []string
	for _, n := range Nodes {
		if n.Name != self.Name {
			out = append(out, n.PodCIDR4+" via "+n.IP4, n.PodCIDR6+" via "+n.IP6)
		}
	}
	return out
}

// startNetwork builds the segment: the client (routed to the bgp pool
// through the router), the router running FRR, and every node's
// namespace with its host-gw routes and the MachineConfig's kernel
// settings.
func (c *Cluster) startNetwork(t testing.TB) {
	t.Helper()
	c.Lab = netlab.New(t)
	c.Client = c.Lab.AddHost("client", netlab.HostOpts{
		Addrs:  []string{ClientIP4 + "/24", ClientIP6 + "/64"},
		Routes: []string{bgpPool4 + " via " + TorIP4, bgpPool6 + " via " + TorIP6},
	})
	c.Tor = c.Lab.AddHost("tor", netlab.HostOpts{
		Addrs: []string{TorIP4 + "/24", TorIP6 + "/64"},
		// Forwarding, and ECMP hashed on ports too, so that one client's
		// connections spread over the announcing nodes.
		Sysctls: []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
			"net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"},
	})
	// A router on the nodes' own LAN sends the client, which shares that
	// LAN, ICMP redirects for a bgp pool's addresses: "reach it through
	// that node directly". The client then bypasses the router, its ECMP
	// and its withdrawals, and keeps sending to a node that announces the
	// address no more (a Local Service's pod moved away, a node lost)
	// until the redirect expires, minutes later. Seen here: a Local
	// address stopped answering after its pod moved. A router facing the
	// nodes' LAN is to send none (docs/bgp.md); Linux has no IPv6 switch
	// for it, so the router drops both kinds on their way out.
	for _, cmd := range [][]string{
		{"nft", "add", "table", "inet", "router"},
		{"nft", "add", "chain", "inet", "router", "out", "{ type filter hook output priority 0 ; }"},
		{"nft", "add", "rule", "inet", "router", "out", "icmp", "type", "redirect", "drop"},
		{"nft", "add", "rule", "inet", "router", "out", "icmpv6", "type", "nd-redirect", "drop"},
	} {
		if out, err := c.Tor.Exec(cmd...); err != nil {
			t.Fatalf("router: %v: %v: %s", cmd, err, out)
		}
	}
	dir := lab.SharedDir(t, "vipctl-cluster-tor-")
	lab.WriteFRRConf(t, dir, routerConf(c.opts.BFD)...)
	c.Router = lab.StartFRR(t, c.Tor, dir)
	for _, s := range Nodes {
		h := c.Lab.AddHost(s.Name, netlab.HostOpts{
			Addrs:   []string{s.IP4 + "/24", s.IP6 + "/64"},
			Routes:  hostGWRoutes(s),
			Sysctls: nodeSysctls,
		})
		c.applySysctls(t, h, s.Role)
	}
}

// applySysctls applies the kernel settings of the role's MachineConfig to
// the node's namespace, as systemd-sysctl does at boot.
func (c *Cluster) applySysctls(t testing.TB, h *netlab.Host, role string) {
	t.Helper()
	_, sysctls := splitSysctls(c.roleFiles[role])
	for _, f := range sysctls {
		if err := h.ApplySysctl(f.Data); err != nil {
			t.Fatalf("%s: %s: %v", h.Name, f.Path, err)
		}
	}
}

// routerConf is the router's FRR: dynamic neighbours from the machine
// network in both families (it needs no list of nodes), IPv6 unicast on
// the IPv6 sessions, ECMP over every announcing node.
func routerConf(bfd bool) []string {
	conf := []string{
		"frr defaults traditional",
		"hostname tor",
		"log stdout informational",
		"router bgp 64512",
		" bgp router-id " + TorIP4,
		" no bgp ebgp-requires-policy",
		" neighbor nodes peer-group",
		" neighbor nodes remote-as 64513",
		" neighbor nodes timers 1 3",
		" neighbor nodes6 peer-group",
		" neighbor nodes6 remote-as 64513",
		" neighbor nodes6 timers 1 3",
		" bgp listen range " + machineNet4 + " peer-group nodes",
		" bgp listen range " + machineNet6 + " peer-group nodes6",
		" address-family ipv4 unicast",
		"  maximum-paths 8",
		" exit-address-family",
		" address-family ipv6 unicast",
		"  neighbor nodes6 activate",
		"  maximum-paths 8",
		" exit-address-family",
		"exit",
	}
	if bfd {
		i := slices.Index(conf, " bgp listen range "+machineNet4+" peer-group nodes")
		conf = slices.Insert(conf, i, " neighbor nodes bfd", " neighbor nodes6 bfd")
	}
	return conf
}

// cniConfig is the node's CNI network: a bridge with the node's pod
// ranges (host-local, leases under /run), the pods' default routes
// through it, and portmap for hostPorts. hairpinMode lets a pod reach
// itself through a Service.
func cniConfig(t testing.TB, s NodeSpec) []byte {
	t.Helper()
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "lab",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni/networks",
					"ranges":  []any{[]any{map[string]string{"subnet": s.PodCIDR4}}, []any{map[string]string{"subnet": s.PodCIDR6}}},
					"routes":  []any{map[string]string{"dst": "0.0.0.0/0"}, map[string]string{"dst": "::/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// nodeFiles are the files the lab lays on a node besides vipctl's
// MachineConfig, as an installer would: the credentials, the CNI
// network, and the components' static pods.
func (c *Cluster) nodeFiles(t testing.TB, s NodeSpec) []kubeletlab.File {
	t.Helper()
	files := []kubeletlab.File{
		{Path: caFile, Mode: 0o644, Data: c.pki.ca.CertPEM()},
		{Path: kubeletClientFile, Mode: 0o600, Data: c.pki.kubeletClient(t, s.Name)},
		{Path: kubeProxyKubeconfig, Mode: 0o600, Data: c.pki.kubeProxy},
		{Path: cniConfigPath, Mode: 0o644, Data: cniConfig(t, s)},
	}
	if s.Role == RoleMaster {
		files = append(files,
			kubeletlab.File{Path: apiserverCertFile, Mode: 0o644, Data: c.pki.serverCert},
			kubeletlab.File{Path: apiserverKeyFile, Mode: 0o600, Data: c.pki.serverKey},
			kubeletlab.File{Path: saKeyFile, Mode: 0o600, Data: c.pki.saKey},
			kubeletlab.File{Path: saPubFile, Mode: 0o644, Data: c.pki.saPub},
			kubeletlab.File{Path: kcmKubeconfig, Mode: 0o600, Data: c.pki.kcm},
			kubeletlab.File{Path: schedKubeconfig, Mode: 0o600, Data: c.pki.scheduler},
		)
	}
	for _, p := range c.staticPods(s) {
		files = append(files, manifestFile(t, p))
	}
	return files
}
