package installercheck

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/nodelist"
)

// The fixtures: one cluster, written the way each file writes it. Each
// case edits one of them.
const (
	clusterFile = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: ostest}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
  ingress:
  - {name: default, vips: [198.51.100.6]}
  servicePools:
  - {name: general, addresses: [198.51.100.128/26]}
`
	dualStackFile = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: ostest}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:100::/64"]
  api: {vips: ["2001:db8:100::5", 198.51.100.5]}
  ingress:
  - {name: default, vips: [198.51.100.6, "2001:db8:100::6"]}
`
	installConfig = `apiVersion: v1
baseDomain: example.test
metadata: {name: ostest}
networking:
  machineNetwork:
  - cidr: 198.51.100.0/24
platform:
  baremetal:
    apiVIPs: [198.51.100.5]
    ingressVIPs: [198.51.100.6]
    loadBalancer: {type: UserManaged}
`
	agentConfig = `apiVersion: v1beta1
kind: AgentConfig
metadata: {name: ostest}
rendezvousIP: 198.51.100.11
hosts:
- {hostname: master-0, role: master}
- {hostname: Master-1, role: master}
- {hostname: master-2}
`
)

// The same cluster in spec.mode poolsOnly, and installed on platform none.
var (
	poolsOnlyFile = strings.Replace(strings.Replace(clusterFile,
		"  api: {vips: [198.51.100.5]}\n  ingress:\n  - {name: default, vips: [198.51.100.6]}\n", "", 1),
		"  baseDomain:", "  mode: poolsOnly\n  baseDomain:", 1)
	platformNone = strings.Replace(installConfig,
		"  baremetal:\n    apiVIPs: [198.51.100.5]\n    ingressVIPs: [198.51.100.6]\n    loadBalancer: {type: UserManaged}\n", "  none: {}\n", 1)
)

// nodes is the node list of the command (--nodes): three control-plane
// nodes and a worker.
var nodes = []cluster.Node{
	{Name: "master-0", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}},
	{Name: "master-1", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.12")}},
	{Name: "master-2", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.13")}},
	{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.21")}},
}

func edit(t *testing.T, s, old, replacement string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("edit does not apply: %q", old)
	}
	return strings.Replace(s, old, replacement, 1)
}

// TestCheck: each disagreement refused with the field of each file, every
// one at once; the combinations that agree pass.
func TestCheck(t *testing.T) {
	t.Parallel()
	userManagedWhy := "two VRRP speakers would fight over each VIP; install with loadBalancer.type: UserManaged (or platform: none), or set spec.mode: poolsOnly for vipctl to carry only the Service pools beside OpenShift's keepalived"
	agentWhy := "passes it on to the cluster only from OpenShift 4.23 (openshift/installer PR #10558; issue #10108), and "
	agentFix := ": the cluster would run OpenShift's own keepalived and haproxy beside vipctl's, two VRRP speakers for each VIP; install with platform: none for an agent-based install of this release"
	rendezvousWhy := "the rendezvous host bootstraps the cluster in place and becomes a control-plane node: it must be one of the list's control-plane nodes, whose API VIP comes up before the API does"
	for _, tc := range []struct {
		name                    string
		cluster, install, agent string
		nodes                   []cluster.Node
		releaseFrom             string
		want                    []string
	}{
		// Agreeing files.
		{name: "baremetal, user-managed", cluster: clusterFile, install: installConfig},
		{name: "vsphere, user-managed", cluster: clusterFile, install: edit(t, installConfig, "baremetal:", "vsphere:")},
		{name: "platform none, agent-based, every host in the node list", cluster: clusterFile, install: platformNone, agent: agentConfig, nodes: nodes},
		{name: "platform none, agent-based, no node list", cluster: clusterFile, install: platformNone, agent: agentConfig},
		{name: "pools only beside OpenShift's default load balancer", cluster: poolsOnlyFile, install: edit(t, installConfig, "    loadBalancer: {type: UserManaged}\n", "")},
		{name: "pools only on any platform", cluster: poolsOnlyFile, install: edit(t, installConfig, "baremetal:", "openstack:")},
		{name: "VIPs as sets, however spelt", cluster: dualStackFile, install: edit(t, edit(t, edit(t, installConfig,
			"- cidr: 198.51.100.0/24\n", "- cidr: 198.51.100.0/24\n  - cidr: 2001:db8:100::/64\n"),
			"apiVIPs: [198.51.100.5]", `apiVIPs: [198.51.100.5, "2001:db8:100:0::5"]`),
			"ingressVIPs: [198.51.100.6]", `ingressVIPs: ["2001:db8:100::6", 198.51.100.6]`)},
		{name: "legacy apiVIP and ingressVIP", cluster: clusterFile, install: edit(t, edit(t, installConfig,
			"apiVIPs: [198.51.100.5]", "apiVIP: 198.51.100.5"), "ingressVIPs: [198.51.100.6]", "ingressVIP: 198.51.100.6")},
		{name: "base domain with a trailing dot", cluster: clusterFile, install: edit(t, installConfig, "baseDomain: example.test", "baseDomain: Example.Test.")},

		// The load balancer.
		{name: "default load balancer, unset", cluster: clusterFile, install: edit(t, installConfig, "    loadBalancer: {type: UserManaged}\n", ""),
			want: []string{`install-config.yaml: platform.baremetal.loadBalancer.type: Required value: unset is OpenShiftManagedDefault: OpenShift then runs its own keepalived and haproxy for the API and ingress VIPs, and cluster.yaml: spec.mode: full (the default) has vipctl run keepalived for them too: ` + userManagedWhy}},
		{name: "default load balancer, written, spec.mode written", cluster: edit(t, clusterFile, "  baseDomain:", "  mode: full\n  baseDomain:"), install: edit(t, installConfig, "UserManaged", "OpenShiftManagedDefault"),
			want: []string{`install-config.yaml: platform.baremetal.loadBalancer.type: Invalid value: "OpenShiftManagedDefault": OpenShift then runs its own keepalived and haproxy for the API and ingress VIPs, and cluster.yaml: spec.mode: full has vipctl run keepalived for them too: ` + userManagedWhy}},
		{name: "vsphere, default load balancer", cluster: clusterFile, install: edit(t, edit(t, installConfig, "baremetal:", "vsphere:"), "UserManaged", "OpenShiftManagedDefault"),
			want: []string{`install-config.yaml: platform.vsphere.loadBalancer.type: Invalid value: "OpenShiftManagedDefault": OpenShift then runs its own keepalived and haproxy for the API and ingress VIPs, and cluster.yaml: spec.mode: full (the default) has vipctl run keepalived for them too: ` + userManagedWhy}},
		{name: "baremetal without a value", cluster: clusterFile, install: edit(t, platformNone, "  none: {}\n", "  baremetal:\n"),
			want: []string{`install-config.yaml: platform.baremetal.loadBalancer.type: Required value: unset is OpenShiftManagedDefault: OpenShift then runs its own keepalived and haproxy for the API and ingress VIPs, and cluster.yaml: spec.mode: full (the default) has vipctl run keepalived for them too: ` + userManagedWhy}},
		{name: "another platform", cluster: clusterFile, install: edit(t, installConfig, "baremetal:", "nutanix:"),
			want: []string{`install-config.yaml: platform: Invalid value: "nutanix": cluster.yaml: spec.mode: full (the default) has vipctl hold the API and ingress VIPs in place of the on-premise load balancer OpenShift runs on platform baremetal or vsphere (installed with loadBalancer.type: UserManaged), or on platform none, which has none; platform nutanix is not one of them`}},
		{name: "no platform", cluster: clusterFile, install: edit(t, platformNone, "platform:\n  none: {}\n", ""),
			want: []string{`install-config.yaml: platform: Required value: cluster.yaml: spec.mode: full (the default) has vipctl hold the API and ingress VIPs, on platform baremetal or vsphere with loadBalancer.type: UserManaged, or platform none`}},
		{name: "two platforms", cluster: clusterFile, install: installConfig + "  none: {}\n",
			want: []string{`install-config.yaml: platform: Invalid value: "baremetal, none": one platform, as the installer wants`}},
		{name: "agent-based, baremetal, user-managed, before 4.23", cluster: clusterFile, install: installConfig, agent: agentConfig, nodes: nodes,
			want: []string{`install-config.yaml: platform.baremetal.loadBalancer.type: Invalid value: "UserManaged": the agent-based installer (--agent-config agent-config.yaml) ` + agentWhy + `cluster.yaml: spec.openshiftRelease is 4.14` + agentFix}},
		{name: "agent-based, vsphere, user-managed, release from the flag", cluster: edit(t, clusterFile, "  baseDomain:", "  openshiftRelease: \"4.22\"\n  baseDomain:"), install: edit(t, installConfig, "baremetal:", "vsphere:"), agent: agentConfig, releaseFrom: "--openshift-release",
			want: []string{`install-config.yaml: platform.vsphere.loadBalancer.type: Invalid value: "UserManaged": the agent-based installer (--agent-config agent-config.yaml) ` + agentWhy + `--openshift-release is 4.22` + agentFix}},

		// The cluster's names.
		{name: "cluster name", cluster: clusterFile, install: edit(t, installConfig, "name: ostest", "name: ostest2"),
			want: []string{`install-config.yaml: metadata.name: Invalid value: "ostest2": cluster.yaml: metadata.name is "ostest": the same cluster name in both (it names the cluster's DNS records, and OpenShift's VRRP IDs are computed from it)`}},
		{name: "base domain", cluster: poolsOnlyFile, install: edit(t, installConfig, "baseDomain: example.test", "baseDomain: example.com"),
			want: []string{`install-config.yaml: baseDomain: Invalid value: "example.com": cluster.yaml: spec.baseDomain is "example.test": the same domain in both (api.ostest.<baseDomain> and *.apps.ostest.<baseDomain> resolve to the VIPs)`}},

		// The VIPs.
		{name: "API VIPs", cluster: clusterFile, install: edit(t, installConfig, "apiVIPs: [198.51.100.5]", "apiVIPs: [198.51.100.7]"),
			want: []string{`install-config.yaml: platform.baremetal.apiVIPs: Invalid value: ["198.51.100.7"]: cluster.yaml: spec.api.vips is [198.51.100.5]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`}},
		{name: "legacy apiVIP", cluster: clusterFile, install: edit(t, installConfig, "apiVIPs: [198.51.100.5]", "apiVIP: 198.51.100.7"),
			want: []string{`install-config.yaml: platform.baremetal.apiVIP: Invalid value: ["198.51.100.7"]: cluster.yaml: spec.api.vips is [198.51.100.5]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`}},
		{name: "one family of two", cluster: dualStackFile, install: edit(t, edit(t, edit(t, installConfig,
			"- cidr: 198.51.100.0/24\n", "- cidr: 198.51.100.0/24\n  - cidr: 2001:db8:100::/64\n"),
			"apiVIPs: [198.51.100.5]", `apiVIPs: [198.51.100.5]`),
			"ingressVIPs: [198.51.100.6]", `ingressVIPs: ["2001:db8:100::6", 198.51.100.6]`),
			want: []string{`install-config.yaml: platform.baremetal.apiVIPs: Invalid value: ["198.51.100.5"]: cluster.yaml: spec.api.vips is [2001:db8:100::5, 198.51.100.5]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`}},
		{name: "ingress VIPs", cluster: clusterFile, install: edit(t, installConfig, "ingressVIPs: [198.51.100.6]", "ingressVIPs: [198.51.100.8]"),
			want: []string{`install-config.yaml: platform.baremetal.ingressVIPs: Invalid value: ["198.51.100.8"]: cluster.yaml: spec.ingress[0].vips is [198.51.100.6]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`}},
		{name: "no default IngressController", cluster: edit(t, clusterFile, "{name: default, vips: [198.51.100.6]}", "{name: shard, domain: shard.example.test, vips: [198.51.100.6]}"), install: installConfig,
			want: []string{`install-config.yaml: platform.baremetal.ingressVIPs: Invalid value: ["198.51.100.6"]: cluster.yaml: spec.ingress has no entry named default: the default IngressController's VIPs are these`}},
		{name: "pools only: a pool holds OpenShift's VIPs", cluster: edit(t, poolsOnlyFile, "addresses: [198.51.100.128/26]", "addresses: [198.51.100.128/26, 198.51.100.4-198.51.100.7]"), install: edit(t, installConfig, "UserManaged", "OpenShiftManagedDefault"),
			want: []string{
				`cluster.yaml: spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.4-198.51.100.7": holds 198.51.100.5, install-config.yaml: platform.baremetal.apiVIPs[0]: in cluster.yaml: spec.mode: poolsOnly OpenShift's own keepalived holds that address; a Service given it would fight it`,
				`cluster.yaml: spec.servicePools[0].addresses[1]: Invalid value: "198.51.100.4-198.51.100.7": holds 198.51.100.6, install-config.yaml: platform.baremetal.ingressVIPs[0]: in cluster.yaml: spec.mode: poolsOnly OpenShift's own keepalived holds that address; a Service given it would fight it`,
			}},

		// The machine networks.
		{name: "machine networks", cluster: clusterFile, install: edit(t, edit(t, edit(t, installConfig,
			"- cidr: 198.51.100.0/24", "- cidr: 203.0.113.0/24"), "[198.51.100.5]", "[203.0.113.5]"), "[198.51.100.6]", "[203.0.113.6]"),
			want: []string{
				`install-config.yaml: platform.baremetal.apiVIPs: Invalid value: ["203.0.113.5"]: cluster.yaml: spec.api.vips is [198.51.100.5]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`,
				`install-config.yaml: platform.baremetal.ingressVIPs: Invalid value: ["203.0.113.6"]: cluster.yaml: spec.ingress[0].vips is [198.51.100.6]: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those`,
				`cluster.yaml: spec.api.vips[0]: Invalid value: "198.51.100.5": outside install-config.yaml: networking.machineNetwork (203.0.113.0/24): a VIP must be on the nodes' own network`,
				`cluster.yaml: spec.ingress[0].vips[0]: Invalid value: "198.51.100.6": outside install-config.yaml: networking.machineNetwork (203.0.113.0/24): a VIP must be on the nodes' own network`,
				`install-config.yaml: networking.machineNetwork: Invalid value: "203.0.113.0/24": cluster.yaml: spec.machineNetworks is [198.51.100.0/24]: the same networks in both`,
			}},
		{name: "machine networks: the installer's default", cluster: clusterFile, install: edit(t, platformNone, "networking:\n  machineNetwork:\n  - cidr: 198.51.100.0/24\n", ""),
			want: []string{
				`cluster.yaml: spec.api.vips[0]: Invalid value: "198.51.100.5": outside install-config.yaml: networking.machineNetwork (none written: the installer's default) (10.0.0.0/16): a VIP must be on the nodes' own network`,
				`cluster.yaml: spec.ingress[0].vips[0]: Invalid value: "198.51.100.6": outside install-config.yaml: networking.machineNetwork (none written: the installer's default) (10.0.0.0/16): a VIP must be on the nodes' own network`,
				`install-config.yaml: networking.machineNetwork: Invalid value: "10.0.0.0/16": cluster.yaml: spec.machineNetworks is [198.51.100.0/24]: the same networks in both (install-config names none: the installer's default)`,
			}},
		{name: "machine networks: routed VIPs outside them", cluster: edit(t, edit(t, clusterFile, "machineNetworks: [198.51.100.0/24]\n  api: {vips: [198.51.100.5]}\n  ingress:\n  - {name: default, vips: [198.51.100.6]}",
			"machineNetworks: [198.51.100.0/24]\n  api: {vips: [203.0.113.5], routed: true}\n  ingress:\n  - {name: default, vips: [203.0.113.6], routed: true}\n  vrrp: {mode: unicast}\n  bgp: {asn: 64513, peers: [{address: 198.51.100.1, asn: 64512}]}"),
			"servicePools:\n  - {name: general, addresses: [198.51.100.128/26]}\n", ""),
			install: edit(t, edit(t, installConfig, "[198.51.100.5]", "[203.0.113.5]"), "[198.51.100.6]", "[203.0.113.6]")},
		{name: "machine networks: one more in the cluster file", cluster: edit(t, clusterFile, "machineNetworks: [198.51.100.0/24]", "machineNetworks: [198.51.100.0/24, 203.0.113.0/24]"), install: installConfig,
			want: []string{`install-config.yaml: networking.machineNetwork: Invalid value: "198.51.100.0/24": cluster.yaml: spec.machineNetworks is [198.51.100.0/24, 203.0.113.0/24]: the same networks in both`}},

		// The agent-based installer's hosts.
		{name: "agent host not in the node list", cluster: clusterFile, install: platformNone, agent: edit(t, agentConfig, "hostname: master-2", "hostname: master-3"), nodes: nodes,
			want: []string{`agent-config.yaml: hosts[2].hostname: Invalid value: "master-3": no node of nodes.yaml (--nodes) has this name (items[].metadata.name): the node list holds every host the installer installs, under the name its Node will have`}},
		{name: "rendezvous host a worker", cluster: clusterFile, install: platformNone, agent: edit(t, agentConfig, "rendezvousIP: 198.51.100.11", "rendezvousIP: 198.51.100.21"), nodes: nodes,
			want: []string{`agent-config.yaml: rendezvousIP: Invalid value: "198.51.100.21": nodes.yaml: node worker-0 has this address and is no control-plane node: ` + rendezvousWhy}},
		{name: "rendezvous host no node", cluster: clusterFile, install: platformNone, agent: edit(t, agentConfig, "rendezvousIP: 198.51.100.11", "rendezvousIP: 198.51.100.99"), nodes: nodes,
			want: []string{`agent-config.yaml: rendezvousIP: Invalid value: "198.51.100.99": no node of nodes.yaml (--nodes) has this address (items[].status.addresses): ` + rendezvousWhy}},
		{name: "rendezvous not an address", cluster: clusterFile, install: platformNone, agent: edit(t, agentConfig, "rendezvousIP: 198.51.100.11", "rendezvousIP: master-0"), nodes: nodes,
			want: []string{`agent-config.yaml: rendezvousIP: Invalid value: "master-0": not an IP address`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := check(t, tc.cluster, tc.install, tc.agent, tc.nodes, tc.releaseFrom)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestAgentUserManagedFromItsRelease: from the release whose agent-based
// installer passes the load balancer type on, a user-managed load
// balancer is right with an agent-config too. No release vipctl supports
// is that new yet, so the test moves the boundary (not in parallel).
func TestAgentUserManagedFromItsRelease(t *testing.T) {
	since := AgentUserManagedSince
	t.Cleanup(func() { AgentUserManagedSince = since })
	AgentUserManagedSince.Minor = 22
	cfg := edit(t, clusterFile, "  baseDomain:", "  openshiftRelease: \"4.22\"\n  baseDomain:")
	if got := check(t, cfg, installConfig, agentConfig, nodes, ""); len(got) > 0 {
		t.Errorf("refused:\n%s", strings.Join(got, "\n"))
	}
	cfg = edit(t, clusterFile, "  baseDomain:", "  openshiftRelease: \"4.21\"\n  baseDomain:")
	if got := check(t, cfg, installConfig, agentConfig, nodes, ""); len(got) != 1 || !strings.Contains(got[0], "only from OpenShift 4.22") {
		t.Errorf("4.21: got %q, want the refusal", got)
	}
}

// check writes the files, reads them as the commands do and returns
// Check's errors with the directory left out.
func check(t *testing.T, clusterYAML, install, agent string, list []cluster.Node, releaseFrom string) []string {
	t.Helper()
	c, err := v1alpha1.Parse([]byte(clusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	in := nodelist.Installer{InstallConfig: write("install-config.yaml", install)}
	if agent != "" {
		in.AgentConfig = write("agent-config.yaml", agent)
	}
	files, err := nodelist.ReadInstaller(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range Check(Input{Config: c, ConfigPath: "cluster.yaml", ReleaseFrom: releaseFrom, Files: files, Nodes: list, NodesPath: "nodes.yaml"}) {
		got = append(got, strings.ReplaceAll(e.Error(), dir+"/", ""))
	}
	return got
}
