package nodelist

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// InstallerFiles is what the installer's files say about the cluster that
// a cluster file must agree with (pkg/installercheck compares them), each
// value with the field it was read from.
type InstallerFiles struct {
	// Installer names the files.
	Installer
	// ClusterName is install-config's metadata.name.
	ClusterName string
	// BaseDomain is install-config's baseDomain.
	BaseDomain string
	// MachineNetworks are networking.machineNetwork as the installer
	// takes them: its default (10.0.0.0/16) when the file names none,
	// which MachineNetworksDefault then says.
	MachineNetworks        []netip.Prefix
	MachineNetworksDefault bool
	// Platforms are the keys under platform, sorted: one ("baremetal",
	// "vsphere", "none", ...) in a file the installer takes.
	Platforms []string
	// OnPrem is platform.baremetal or platform.vsphere; nil on another
	// platform.
	OnPrem *OnPremPlatform
	// RendezvousIP is agent-config's rendezvousIP: the host that
	// bootstraps the cluster in place.
	RendezvousIP string
	// AgentHosts are agent-config's hosts.
	AgentHosts []AgentHost
}

// OnPremPlatform is what install-config's platform.baremetal or
// platform.vsphere says about the VIPs and who holds them.
type OnPremPlatform struct {
	// Field is the platform's field: platform.baremetal, platform.vsphere.
	Field string
	// APIVIPs are apiVIPs, or the older apiVIP; IngressVIPs likewise.
	APIVIPs, IngressVIPs FieldValues
	// LoadBalancerType is loadBalancer.type; empty when unset, which
	// the installer takes as OpenShiftManagedDefault.
	LoadBalancerType string
	// BootstrapExternalStaticIP is bootstrapExternalStaticIP: the
	// installer-provisioned bootstrap VM's address; empty when unset
	// (the VM takes one by DHCP).
	BootstrapExternalStaticIP string
}

// FieldValues are the values of one field: a list (apiVIPs) or the
// single-valued field it replaced (apiVIP), whichever the file sets.
type FieldValues struct {
	// Field is the field's full path: platform.baremetal.apiVIPs.
	Field  string
	Values []string
}

// AgentHost is one of agent-config's hosts.
type AgentHost struct {
	// Field is the host's path: hosts[2].
	Field string
	// Hostname is the host's hostname as written; the Node's name is
	// its lower-cased form.
	Hostname string
	Role     string
}

// ReadInstaller reads the installer's files as FromInstaller does (the
// same checks of kind, shape and machine networks), for what they say
// about the cluster rather than its hosts' addresses: the agent-config's
// hosts may get their addresses from DHCP here.
func ReadInstaller(in Installer) (InstallerFiles, error) {
	ic, networks, err := readInstallConfig(in.InstallConfig)
	if err != nil {
		return InstallerFiles{}, err
	}
	var names platformNames
	if err := readFile(in.InstallConfig, &names, "an install-config", InstallConfigExample); err != nil {
		return InstallerFiles{}, err
	}
	f := InstallerFiles{
		Installer:              in,
		ClusterName:            ic.Metadata.Name,
		BaseDomain:             ic.BaseDomain,
		MachineNetworks:        networks,
		MachineNetworksDefault: len(ic.Networking.MachineNetwork) == 0,
		Platforms:              slices.Sorted(maps.Keys(names.Platform)),
	}
	// A platform written with no value (`baremetal:`) is that platform
	// with every field unset.
	_, baremetal := names.Platform["baremetal"]
	_, vsphere := names.Platform["vsphere"]
	switch {
	case baremetal:
		f.OnPrem = ic.Platform.Baremetal.summary("platform.baremetal")
	case vsphere:
		f.OnPrem = ic.Platform.VSphere.summary("platform.vsphere")
	}
	if in.AgentConfig == "" {
		return f, nil
	}
	ac, err := readAgentConfig(in.AgentConfig)
	if err != nil {
		return InstallerFiles{}, err
	}
	f.RendezvousIP = ac.RendezvousIP
	for i, h := range ac.Hosts {
		f.AgentHosts = append(f.AgentHosts, AgentHost{Field: fmt.Sprintf("hosts[%d]", i), Hostname: h.Hostname, Role: h.Role})
	}
	return f, nil
}

func (p *onPremPlatform) summary(field string) *OnPremPlatform {
	if p == nil {
		p = &onPremPlatform{}
	}
	vips := func(list []string, listField, single, singleField string) FieldValues {
		if len(list) == 0 && single != "" {
			return FieldValues{Field: field + "." + singleField, Values: []string{single}}
		}
		return FieldValues{Field: field + "." + listField, Values: list}
	}
	return &OnPremPlatform{
		Field:                     field,
		APIVIPs:                   vips(p.APIVIPs, "apiVIPs", p.APIVIP, "apiVIP"),
		IngressVIPs:               vips(p.IngressVIPs, "ingressVIPs", p.IngressVIP, "ingressVIP"),
		LoadBalancerType:          strings.TrimSpace(p.LoadBalancer.Type),
		BootstrapExternalStaticIP: strings.TrimSpace(p.BootstrapExternalStaticIP),
	}
}
