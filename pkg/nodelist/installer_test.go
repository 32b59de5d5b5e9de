package nodelist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
)

const (
	ipiConfig    = "../../examples/installer/install-config.yaml"
	agentExample = "../../examples/installer/agent-config.yaml"
	agentIC      = "../../examples/installer/agent-install-config.yaml"
	// A dual-stack agent-based install, the cluster of
	// examples/dual-stack.yaml.
	dualAgent = "../../testdata/installer/dual-stack-agent-config.yaml"
	dualIC    = "../../testdata/installer/dual-stack-install-config.yaml"
)

// facts is what rendering reads of a node list, one line a node.
func facts(t *testing.T, nodes []corev1.Node) []string {
	t.Helper()
	data, err := cluster.MarshalNodeList(nodes)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := cluster.ParseNodeList("generated", data, "br-ex")
	if err != nil {
		t.Fatalf("the generated list does not read back: %v\n%s", err, data)
	}
	var out []string
	for _, n := range parsed {
		line := []string{n.Name}
		for _, a := range n.Addresses {
			line = append(line, a.String())
		}
		role := "-"
		if n.ControlPlane {
			role = "control-plane"
		}
		worker := "-"
		if _, ok := n.Labels[cluster.RoleLabel("worker")]; ok {
			worker = "worker"
		}
		out = append(out, strings.Join(append(line, role, worker), " "))
	}
	return out
}

// TestFromInstallerBaremetal: an installer-provisioned bare-metal
// install-config in the documented shape: each host's name and role, and
// of its static addresses the one in the machine network (worker-0's
// storage address first is not its address).
func TestFromInstallerBaremetal(t *testing.T) {
	t.Parallel()
	nodes, notes, err := FromInstaller(Installer{InstallConfig: ipiConfig})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"master-0 198.51.100.11 control-plane -",
		"master-1 198.51.100.12 control-plane -",
		"master-2 198.51.100.13 control-plane -",
		"worker-0 198.51.100.21 - worker",
		"worker-1 198.51.100.22 - worker",
	}
	if got := facts(t, nodes); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "each Node is named by its host's hostname") {
		t.Errorf("notes %q: want the one about names", notes)
	}
}

// TestFromInstallerAgent: the agent-based installer's files in the
// documented shape, a compact cluster with a VLAN on a bond: the worker
// role on the control plane since there is no worker.
func TestFromInstallerAgent(t *testing.T) {
	t.Parallel()
	nodes, notes, err := FromInstaller(Installer{InstallConfig: agentIC, AgentConfig: agentExample})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q: agent-config sets the hostnames itself", notes)
	}
	want := []string{
		"master-0 198.51.100.11 control-plane worker",
		"master-1 198.51.100.12 control-plane worker",
		"master-2 198.51.100.13 control-plane worker",
	}
	if got := facts(t, nodes); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFromInstallerAgentDualStack: a compact dual-stack cluster's files
// give the nodes examples/nodes/compact.yaml describes by hand: both
// addresses in the machine networks' order.
func TestFromInstallerAgentDualStack(t *testing.T) {
	t.Parallel()
	nodes, _, err := FromInstaller(Installer{InstallConfig: dualIC, AgentConfig: dualAgent})
	if err != nil {
		t.Fatal(err)
	}
	handWritten, err := cluster.LoadNodeListFile("../../examples/nodes/compact.yaml", "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	want := facts(t, handWritten.Objects)
	if got := facts(t, nodes); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGeneratedListRenders: what `vipctl nodes` writes is what `render
// --nodes` takes (its checks pass): every node's files render and the control-plane
// MachineConfig ships the control-plane nodes.
func TestGeneratedListRenders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		example string
		in      Installer
		cp      int
	}{
		{"compact-ipv4.yaml", Installer{InstallConfig: ipiConfig}, 3},
		{"compact-ipv4.yaml", Installer{InstallConfig: agentIC, AgentConfig: agentExample}, 3},
		{"dual-stack.yaml", Installer{InstallConfig: dualIC, AgentConfig: dualAgent}, 3},
	} {
		nodes, _, err := FromInstaller(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		data, err := cluster.MarshalNodeList(nodes)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "nodes.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// As render --nodes reads it: checked against the cluster file.
		c := fixture.Example(t, tc.example)
		list, err := Input{Path: path, Config: c, ConfigPath: tc.example, Interface: "br-ex"}.Load()
		if err != nil {
			t.Fatal(err)
		}
		files, err := bundle.Build(c, bundle.Options{Nodes: list.Nodes, BootstrapNodes: list.Objects})
		if err != nil {
			t.Fatalf("%s: %v", tc.example, err)
		}
		perNode := 0
		for _, f := range files {
			if strings.HasSuffix(f.Path, onnode.KeepalivedConfPath) {
				perNode++
			}
			if f.Path != "machineconfigs/"+bundle.MachineConfigName(bundle.ControlPlaneRole)+".yaml" {
				continue
			}
			var mc unstructured.Unstructured
			if err := yaml.Unmarshal(f.Data, &mc.Object); err != nil {
				t.Fatal(err)
			}
			shipped, ok, err := machineconfig.FileData(&mc, onnode.BootstrapNodesPath)
			if err != nil || !ok {
				t.Fatalf("%s: the master MachineConfig ships no bootstrap list: %v", tc.example, err)
			}
			cp, err := cluster.ParseNodeList(onnode.BootstrapNodesPath, shipped, "br-ex")
			if err != nil || len(cp) != tc.cp {
				t.Errorf("%s: bootstrap list %v, %d nodes, want %d", tc.example, err, len(cp), tc.cp)
			}
		}
		if perNode != len(nodes) {
			t.Errorf("%s: %d keepalived.conf for %d nodes", tc.example, perNode, len(nodes))
		}
	}
}

// TestFromInstallerErrors: a file of the wrong shape is refused naming the
// file and the field, and shows the shape wanted.
func TestFromInstallerErrors(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile(ipiConfig)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile(agentExample)
	if err != nil {
		t.Fatal(err)
	}
	dual, err := os.ReadFile(dualAgent)
	if err != nil {
		t.Fatal(err)
	}
	agentInstall, err := os.ReadFile(dualIC)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(s []byte, old, new string) string {
		if !strings.Contains(string(s), old) {
			t.Fatalf("edit does not apply: %q", old)
		}
		return strings.Replace(string(s), old, new, 1)
	}
	for _, tc := range []struct {
		name                string
		installConfig       string
		agentConfig         string
		want, wantExampleOf string
	}{
		{name: "agent-config given as install-config", installConfig: string(agent),
			want: `install-config.yaml: kind "AgentConfig": not an install-config (an agent-config: pass it with --agent-config, and install-config.yaml with --install-config); want, for example:`, wantExampleOf: "install"},
		{name: "role not a string", installConfig: edit(base, "      role: master\n", "      role: [master]\n"),
			want: "install-config.yaml: platform.baremetal.hosts[0].role: Invalid value: must be a string, not a list\nwant, for example:", wantExampleOf: "install"},
		{name: "every value of the wrong kind, with its index", installConfig: edit([]byte(edit(base, "    - name: worker-1\n", "    - name: [worker-1]\n")), "- cidr: 198.51.100.0/24", "- cidr: {ip: 198.51.100.0}"),
			want: "install-config.yaml: networking.machineNetwork[0].cidr: Invalid value: must be a string, not a mapping\n" +
				"install-config.yaml: platform.baremetal.hosts[4].name: Invalid value: must be a string, not a list\nwant, for example:", wantExampleOf: "install"},
		{name: "not YAML", installConfig: "apiVersion: v1\n\tplatform: {\n",
			want: `install-config.yaml: not valid YAML: yaml: line 2: found a tab character that violates indentation`},
		{name: "no hosts", installConfig: "apiVersion: v1\nplatform:\n  none: {}\n",
			want: `install-config.yaml: platform.baremetal.hosts: no host; want the hosts the installer provisions (or pass the agent-based installer's agent-config.yaml with --agent-config), for example:`, wantExampleOf: "install"},
		{name: "hosts not a list", installConfig: "apiVersion: v1\nplatform:\n  baremetal:\n    hosts: {name: master-0}\n",
			want: "install-config.yaml: platform.baremetal.hosts: Invalid value: must be a list, not a mapping\nwant, for example:", wantExampleOf: "install"},
		{name: "DHCP host", installConfig: edit(base, "      networkConfig:\n        interfaces:\n        - name: eno1\n          type: ethernet\n          state: up\n          ipv4:\n            enabled: true\n            dhcp: false\n            address:\n            - ip: 198.51.100.12\n", "      networkConfig:\n        interfaces:\n        - name: eno1\n          type: ethernet\n          state: up\n          ipv4:\n            enabled: true\n            dhcp: true\n            address:\n            - ip: 198.51.100.12\n"),
			want: ``},
		{name: "no networkConfig", installConfig: edit(base, "      bootMACAddress: 52:54:00:00:01:01\n      networkConfig:", "      bootMACAddress: 52:54:00:00:01:01\n      networkConfigX:"),
			want: "install-config.yaml: platform.baremetal.hosts[1] (master-1): networkConfig has no static address in the machine network (198.51.100.0/24): a DHCP address is known only once the node runs (then: vipctl nodes --from-cluster)\nwant, for example:", wantExampleOf: "install"},
		{name: "address outside the machine network", installConfig: edit(base, "- cidr: 198.51.100.0/24", "- cidr: 198.51.100.0/28"),
			want: "install-config.yaml: platform.baremetal.hosts[3] (worker-0): networkConfig has no static address in the machine network (198.51.100.0/28), only 203.0.113.120 (eno2), 198.51.100.21 (eno1): a DHCP address is known only once the node runs (then: vipctl nodes --from-cluster)\n" +
				"install-config.yaml: platform.baremetal.hosts[4] (worker-1): networkConfig has no static address in the machine network (198.51.100.0/28), only 198.51.100.22 (eno1): a DHCP address is known only once the node runs (then: vipctl nodes --from-cluster)\nwant, for example:", wantExampleOf: "install"},
		{name: "bad machine network", installConfig: edit(base, "- cidr: 198.51.100.0/24", "- cidr: 198.51.100.0"),
			want: `install-config.yaml: networking.machineNetwork[0].cidr: Invalid value: "198.51.100.0": not a CIDR (such as 198.51.100.0/24)`},
		{name: "machine network with host bits", installConfig: edit(base, "- cidr: 198.51.100.0/24", "- cidr: 198.51.100.7/24"),
			want: `install-config.yaml: networking.machineNetwork[0].cidr: Invalid value: "198.51.100.7/24": invalid CIDR: host bits set, did you mean 198.51.100.0/24`},
		{name: "every bad machine network at once", installConfig: edit(base, "- cidr: 198.51.100.0/24", "- cidr: 198.51.100.0/24\n  - cidr: 203.0.113.1/24\n  - cidr: 2001:db8:100::1/64\n  - cidr: nope"),
			want: "install-config.yaml: networking.machineNetwork[1].cidr: Invalid value: \"203.0.113.1/24\": invalid CIDR: host bits set, did you mean 203.0.113.0/24\n" +
				"install-config.yaml: networking.machineNetwork[2].cidr: Invalid value: \"2001:db8:100::1/64\": invalid CIDR: host bits set, did you mean 2001:db8:100::/64\n" +
				"install-config.yaml: networking.machineNetwork[3].cidr: Invalid value: \"nope\": not a CIDR (such as 198.51.100.0/24)"},
		{name: "two hosts with one address", installConfig: edit(base, "            - ip: 198.51.100.22\n", "            - ip: 198.51.100.12\n"),
			want: "install-config.yaml: platform.baremetal.hosts[4].networkConfig.interfaces[0].ipv4.address[0].ip: Invalid value: \"198.51.100.12\": also the address of master-1 (platform.baremetal.hosts[1].networkConfig.interfaces[0].ipv4.address[0].ip): two hosts cannot have one address\nwant, for example:", wantExampleOf: "install"},
		{name: "two agent hosts with one IPv6 address", installConfig: string(agentInstall), agentConfig: edit(dual, "        - ip: 2001:db8:100::13\n", "        - ip: 2001:db8:100:0::12\n"),
			want: "agent-config.yaml: hosts[2].networkConfig.interfaces[1].ipv6.address[0].ip: Invalid value: \"2001:db8:100::12\": also the address of master-1 (hosts[1].networkConfig.interfaces[0].ipv6.address[0].ip): two hosts cannot have one address\nwant, for example:", wantExampleOf: "agent"},
		{name: "no role", installConfig: edit(base, "    - name: worker-1\n      role: worker\n", "    - name: worker-1\n"),
			want: "install-config.yaml: platform.baremetal.hosts[4] (worker-1): role \"\": want master or worker (the installer picks one for a host without, which vipctl cannot know)\nwant, for example:", wantExampleOf: "install"},
		{name: "name twice", installConfig: edit(base, "    - name: worker-1\n", "    - name: Worker-0\n"),
			want: "install-config.yaml: platform.baremetal.hosts[4]: name worker-0 again (first in platform.baremetal.hosts[3])\nwant, for example:", wantExampleOf: "install"},
		{name: "not a Node name", installConfig: edit(base, "    - name: worker-1\n", "    - name: worker_1\n"),
			want: `install-config.yaml: platform.baremetal.hosts[4] (worker_1): not a Node name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "agent-config of another kind", installConfig: string(base), agentConfig: edit(agent, "kind: AgentConfig", "kind: InstallConfig"),
			want: `agent-config.yaml: kind "InstallConfig": want AgentConfig (the agent-based installer's agent-config.yaml), for example:`, wantExampleOf: "agent"},
		{name: "agent host without hostname", installConfig: string(base), agentConfig: edit(agent, "- hostname: master-1\n", "- role: master\n  hostname: \"\"\n"),
			want: "agent-config.yaml: hosts[1]: no name: the Node is named after the host's hostname\nwant, for example:", wantExampleOf: "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := Installer{InstallConfig: filepath.Join(dir, "install-config.yaml")}
			if err := os.WriteFile(in.InstallConfig, []byte(tc.installConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.agentConfig != "" {
				in.AgentConfig = filepath.Join(dir, "agent-config.yaml")
				if err := os.WriteFile(in.AgentConfig, []byte(tc.agentConfig), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := FromInstaller(in)
			if tc.want == "" {
				// dhcp: true beside a static address: nmstate keeps both,
				// the static one is the node's.
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.ReplaceAll(err.Error(), dir+"/", "")
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got\n%s\nwant it to start with\n%s", got, tc.want)
			}
			switch tc.wantExampleOf {
			case "install":
				if !strings.HasSuffix(got, "\n"+InstallConfigExample) {
					t.Errorf("no install-config example in\n%s", got)
				}
			case "agent":
				if !strings.HasSuffix(got, "\n"+AgentConfigExample) {
					t.Errorf("no agent-config example in\n%s", got)
				}
			}
		})
	}
}
