// Package nodelist writes the node list `vipctl render --nodes` reads (a
// NodeList, docs/render.md): before the cluster exists from the OpenShift
// installer's own files (install-config.yaml, agent-config.yaml), and
// afterwards from the cluster's Nodes. Only what rendering reads is
// written: name, role labels, addresses.
package nodelist

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// The fields read from the installer's files, as openshift/installer's
// pkg/types (InstallConfig, baremetal.Host, agent.Config) and the NMState
// schema name them. Everything else in the files is ignored: the
// installer judges its own files.
type (
	installConfig struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		BaseDomain string `json:"baseDomain"`
		Networking struct {
			MachineNetwork []struct {
				CIDR string `json:"cidr"`
			} `json:"machineNetwork"`
		} `json:"networking"`
		ControlPlane struct {
			Architecture string `json:"architecture"`
		} `json:"controlPlane"`
		Platform struct {
			Baremetal *onPremPlatform `json:"baremetal"`
			VSphere   *onPremPlatform `json:"vsphere"`
		} `json:"platform"`
	}
	// onPremPlatform is platform.baremetal or platform.vsphere: the VIPs
	// and the load balancer OpenShift runs for them. Hosts are read of
	// baremetal only (vSphere's hosts are of another shape).
	onPremPlatform struct {
		APIVIPs      []string `json:"apiVIPs"`
		APIVIP       string   `json:"apiVIP"`
		IngressVIPs  []string `json:"ingressVIPs"`
		IngressVIP   string   `json:"ingressVIP"`
		LoadBalancer struct {
			Type string `json:"type"`
		} `json:"loadBalancer"`
		Hosts []installHost `json:"hosts"`
		// BootstrapExternalStaticIP is the installer-provisioned bootstrap
		// VM's address on the machine network (baremetal, 4.11 and later).
		BootstrapExternalStaticIP string `json:"bootstrapExternalStaticIP"`
	}
	// platformNames are the keys under install-config's platform: which
	// platform the cluster is installed on.
	platformNames struct {
		Platform map[string]any `json:"platform"`
	}
	installHost struct {
		Name          string   `json:"name"`
		Role          string   `json:"role"`
		NetworkConfig *nmstate `json:"networkConfig"`
	}
	agentConfig struct {
		APIVersion   string      `json:"apiVersion"`
		Kind         string      `json:"kind"`
		RendezvousIP string      `json:"rendezvousIP"`
		Hosts        []agentHost `json:"hosts"`
	}
	agentHost struct {
		Hostname      string   `json:"hostname"`
		Role          string   `json:"role"`
		NetworkConfig *nmstate `json:"networkConfig"`
	}
	// nmstate is the part of an NMState network state that holds static
	// addresses.
	nmstate struct {
		Interfaces []struct {
			Name string   `json:"name"`
			IPv4 ipConfig `json:"ipv4"`
			IPv6 ipConfig `json:"ipv6"`
		} `json:"interfaces"`
	}
	ipConfig struct {
		Enabled *bool `json:"enabled"`
		Address []struct {
			IP string `json:"ip"`
		} `json:"address"`
	}
)

// defaultMachineNetwork is the installer's machine network when
// install-config names none (pkg/types/defaults: defaultMachineCIDR).
const defaultMachineNetwork = "10.0.0.0/16"

// InstallConfigExample is the shape vipctl reads from install-config.yaml
// (installer-provisioned bare metal), for error messages.
const InstallConfigExample = `apiVersion: v1
metadata: {name: ocp4}
baseDomain: example.com
networking:
  machineNetwork:
  - cidr: 198.51.100.0/24
platform:
  baremetal:
    hosts:
    - name: master-0
      role: master
      networkConfig:
        interfaces:
        - name: eno1
          type: ethernet
          state: up
          ipv4:
            enabled: true
            dhcp: false
            address:
            - ip: 198.51.100.11
              prefix-length: 24`

// AgentConfigExample is the shape vipctl reads from agent-config.yaml (the
// agent-based installer), for error messages.
const AgentConfigExample = `apiVersion: v1beta1
kind: AgentConfig
metadata: {name: ocp4}
rendezvousIP: 198.51.100.11
hosts:
- hostname: master-0
  role: master
  interfaces:
  - name: eno1
    macAddress: 00:ef:44:21:e6:a5
  networkConfig:
    interfaces:
    - name: eno1
      type: ethernet
      state: up
      ipv4:
        enabled: true
        dhcp: false
        address:
        - ip: 198.51.100.11
          prefix-length: 24`

// Installer are the installer's files a node list is built from.
type Installer struct {
	// InstallConfig is the path of install-config.yaml: the machine
	// networks, the architecture and, without AgentConfig, the hosts
	// (platform.baremetal.hosts).
	InstallConfig string
	// AgentConfig, when set, is the path of agent-config.yaml, whose hosts
	// the agent-based installer installs.
	AgentConfig string
}

// host is one host of either file, with where it came from for messages.
type host struct {
	path, field string
	name, role  string
	network     *nmstate
}

// FromInstaller is the node list of the cluster the installer's files
// describe: one Node per host with its role labels (control-plane nodes
// also carry the worker role when there is no worker, as the installer
// makes them schedulable then), the well-known labels the kubelet sets,
// and as InternalIP its static addresses inside the machine networks.
// notes say what the files cannot tell (whether the names are the names
// the Nodes will have).
func FromInstaller(in Installer) (nodes []corev1.Node, notes []string, err error) {
	ic, networks, err := readInstallConfig(in.InstallConfig)
	if err != nil {
		return nil, nil, err
	}
	var hosts []host
	if in.AgentConfig != "" {
		if hosts, err = agentHosts(in.AgentConfig); err != nil {
			return nil, nil, err
		}
	} else {
		if ic.Platform.Baremetal == nil || len(ic.Platform.Baremetal.Hosts) == 0 {
			return nil, nil, fmt.Errorf("%s: platform.baremetal.hosts: no host; want the hosts the installer provisions (or pass the agent-based installer's agent-config.yaml with --agent-config), for example:\n%s", in.InstallConfig, InstallConfigExample)
		}
		for i, h := range ic.Platform.Baremetal.Hosts {
			hosts = append(hosts, host{path: in.InstallConfig, field: fmt.Sprintf("platform.baremetal.hosts[%d]", i), name: h.Name, role: h.Role, network: h.NetworkConfig})
		}
		notes = append(notes, fmt.Sprintf("names are %s's platform.baremetal.hosts[].name; each Node is named by its host's hostname (from DHCP or the PTR record of its address), which may differ, or be the fully qualified name: where it does, write the Node's name here (docs/render.md, \"The bootstrap node list\")", in.InstallConfig))
	}
	arch := ic.ControlPlane.Architecture
	if arch == "" {
		arch = "amd64"
	}
	compact := true
	for _, h := range hosts {
		if h.role == "worker" {
			compact = false
		}
	}
	var errs []error
	seen := map[string]string{}
	owner := map[netip.Addr]string{}
	for _, h := range hosts {
		n, addrs, err := h.node(networks, arch, compact)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, dup := seen[n.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: %s: name %s again (first in %s)", h.path, h.field, n.Name, first))
			continue
		}
		seen[n.Name] = h.field
		// Two hosts with one address (a copied host block): the node
		// list would make a node its own VRRP peer.
		for _, a := range addrs {
			where := h.field + "." + a.field
			if first, dup := owner[a.addr]; dup {
				errs = append(errs, fmt.Errorf("%s: %s: Invalid value: %q: also the address of %s: two hosts cannot have one address", h.path, where, a.addr, first))
				continue
			}
			owner[a.addr] = fmt.Sprintf("%s (%s)", n.Name, where)
		}
		nodes = append(nodes, n)
	}
	if len(errs) > 0 {
		example := InstallConfigExample
		if in.AgentConfig != "" {
			example = AgentConfigExample
		}
		return nil, nil, fmt.Errorf("%w\nwant, for example:\n%s", errors.Join(errs...), example)
	}
	return nodes, notes, nil
}

// readInstallConfig reads install-config.yaml and its machine networks
// (the installer's default when it names none); a file of another kind is
// refused.
func readInstallConfig(path string) (installConfig, []netip.Prefix, error) {
	var ic installConfig
	if err := readFile(path, &ic, "an install-config", InstallConfigExample); err != nil {
		return ic, nil, err
	}
	if ic.Kind != "" {
		hint := ""
		if ic.Kind == "AgentConfig" {
			hint = " (an agent-config: pass it with --agent-config, and install-config.yaml with --install-config)"
		}
		return ic, nil, fmt.Errorf("%s: kind %q: not an install-config%s; want, for example:\n%s", path, ic.Kind, hint, InstallConfigExample)
	}
	networks, err := machineNetworks(path, ic)
	return ic, networks, err
}

// readAgentConfig reads agent-config.yaml; a file of another kind is
// refused.
func readAgentConfig(path string) (agentConfig, error) {
	var ac agentConfig
	if err := readFile(path, &ac, "an agent-config", AgentConfigExample); err != nil {
		return ac, err
	}
	if ac.Kind != "AgentConfig" {
		return ac, fmt.Errorf("%s: kind %q: want AgentConfig (the agent-based installer's agent-config.yaml), for example:\n%s", path, ac.Kind, AgentConfigExample)
	}
	return ac, nil
}

// readFile decodes a YAML file into v, leniently: only the fields vipctl
// reads are checked.
func readFile(path string, v any, what, example string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: not valid YAML: %w", path, err)
	}
	if err := json.Unmarshal(js, v); err != nil {
		// encoding/json names one mismatch, without its list index:
		// name every one at its full path, in the file's words.
		if errs := v1alpha1.KindErrors(js, reflect.TypeOf(v).Elem()); len(errs) > 0 {
			msgs := make([]string, len(errs))
			for i, e := range errs {
				msgs[i] = path + ": " + e.Error()
			}
			return fmt.Errorf("%s\nwant, for example:\n%s", strings.Join(msgs, "\n"), example)
		}
		return fmt.Errorf("%s: not %s: %w; want, for example:\n%s", path, what, err, example)
	}
	return nil
}

// machineNetworks are install-config's machine networks, each refused as
// spec.machineNetworks would be: host bits set are a typo, not a network.
func machineNetworks(path string, ic installConfig) ([]netip.Prefix, error) {
	if len(ic.Networking.MachineNetwork) == 0 {
		return []netip.Prefix{netip.MustParsePrefix(defaultMachineNetwork)}, nil
	}
	var out []netip.Prefix
	var errs []error
	for i, mn := range ic.Networking.MachineNetwork {
		p, err := netip.ParsePrefix(mn.CIDR)
		where := fmt.Sprintf("%s: networking.machineNetwork[%d].cidr: Invalid value: %q", path, i, mn.CIDR)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: not a CIDR (such as 198.51.100.0/24)", where))
		case p.Masked() != p:
			errs = append(errs, fmt.Errorf("%s: invalid CIDR: host bits set, did you mean %s", where, p.Masked()))
		default:
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}

func agentHosts(path string) ([]host, error) {
	ac, err := readAgentConfig(path)
	if err != nil {
		return nil, err
	}
	if len(ac.Hosts) == 0 {
		return nil, fmt.Errorf("%s: hosts: no host; vipctl needs each host's hostname, role and static address, for example:\n%s", path, AgentConfigExample)
	}
	hosts := make([]host, 0, len(ac.Hosts))
	for i, h := range ac.Hosts {
		hosts = append(hosts, host{path: path, field: fmt.Sprintf("hosts[%d]", i), name: h.Hostname, role: h.Role, network: h.NetworkConfig})
	}
	return hosts, nil
}

// node is the Node h becomes, and its addresses with their fields.
func (h host) node(networks []netip.Prefix, arch string, compact bool) (corev1.Node, []hostAddr, error) {
	where := h.path + ": " + h.field
	if h.name == "" {
		return corev1.Node{}, nil, fmt.Errorf("%s: no name: the Node is named after the host's hostname", where)
	}
	// The kubelet names its Node after the hostname, lower-cased.
	name := strings.ToLower(h.name)
	where += " (" + h.name + ")"
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return corev1.Node{}, nil, fmt.Errorf("%s: not a Node name: %s", where, strings.Join(msgs, "; "))
	}
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: arch,
	}
	switch h.role {
	case "master":
		labels[cluster.RoleLabel("master")] = ""
		labels[cluster.RoleLabel("control-plane")] = ""
		if compact {
			labels[cluster.RoleLabel("worker")] = ""
		}
	case "worker":
		labels[cluster.RoleLabel("worker")] = ""
	default:
		return corev1.Node{}, nil, fmt.Errorf("%s: role %q: want master or worker (the installer picks one for a host without, which vipctl cannot know)", where, h.role)
	}
	addrs, found := h.addresses(networks)
	if len(addrs) == 0 {
		nets := make([]string, len(networks))
		for i, n := range networks {
			nets[i] = n.String()
		}
		only := ""
		if len(found) > 0 {
			only = ", only " + strings.Join(found, ", ")
		}
		return corev1.Node{}, nil, fmt.Errorf("%s: networkConfig has no static address in the machine network (%s)%s: a DHCP address is known only once the node runs (then: vipctl nodes --from-cluster)",
			where, strings.Join(nets, ", "), only)
	}
	n := corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.addr.String()})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n, addrs, nil
}

// hostAddr is a static address of a host and its field under the host.
type hostAddr struct {
	addr  netip.Addr
	field string
}

// addresses are h's static addresses inside the machine networks, in the
// machine networks' order (the first is the node's primary address, as
// the installer orders a dual-stack cluster's networks), and every static
// address found, for a message when none is inside.
func (h host) addresses(networks []netip.Prefix) (inside []hostAddr, found []string) {
	if h.network == nil {
		return nil, nil
	}
	var all []hostAddr
	for i, iface := range h.network.Interfaces {
		for _, fam := range []struct {
			name string
			ipc  ipConfig
		}{{"ipv4", iface.IPv4}, {"ipv6", iface.IPv6}} {
			family, ipc := fam.name, fam.ipc
			if ipc.Enabled != nil && !*ipc.Enabled {
				continue
			}
			for j, a := range ipc.Address {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil {
					found = append(found, fmt.Sprintf("%q (%s, not an IP address)", a.IP, iface.Name))
					continue
				}
				all = append(all, hostAddr{addr: ip.Unmap(), field: fmt.Sprintf("networkConfig.interfaces[%d].%s.address[%d].ip", i, family, j)})
				found = append(found, fmt.Sprintf("%s (%s)", ip, iface.Name))
			}
		}
	}
	for _, n := range networks {
		for _, a := range all {
			if n.Contains(a.addr) {
				inside = append(inside, a)
				break
			}
		}
	}
	return inside, found
}
