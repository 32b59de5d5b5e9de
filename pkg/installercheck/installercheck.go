// Package installercheck holds a cluster file to the OpenShift installer's
// own files, which are the source of truth on day 1: install-config.yaml
// names the cluster, its domain, its VIPs, its machine networks and the
// load balancer OpenShift runs, agent-config.yaml the hosts the agent-based
// installer installs. `vipctl validate` and `vipctl render` refuse a
// cluster file (and a node list) that disagrees with them, with every
// disagreement at once, naming the field of each file (docs/validate.md,
// "The installer's files").
package installercheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// The installer's values vipctl reads.
const (
	// UserManaged is loadBalancer.type with which OpenShift runs no
	// keepalived or haproxy of its own (the MCO's
	// isOpenShiftManagedDefaultLB), so vipctl can take their place.
	UserManaged = "UserManaged"
	// OpenShiftManagedDefault is loadBalancer.type when unset.
	OpenShiftManagedDefault = "OpenShiftManagedDefault"
	// PlatformNone has no load balancer of OpenShift's at all.
	PlatformNone = "none"
)

// AgentUserManagedSince is the first release whose agent-based installer
// passes loadBalancer.type: UserManaged on to the cluster it installs
// (openshift/installer PR #10558, "AGENT-626: Allow UserManaged
// LoadBalancer on baremetal/vsphere platforms", merged on master after
// release-4.22 branched; the bug is issue #10108, against release-4.20).
// Before it the cluster runs OpenShift's own keepalived and haproxy
// whatever install-config says.
var AgentUserManagedSince = openshiftrelease.Release{Major: 4, Minor: 23}

// Input is the cluster file and the installer's files it must agree with.
type Input struct {
	// Config is the cluster file, defaulted and valid (v1alpha1.Load).
	Config *v1alpha1.ClusterVIPs
	// ConfigPath names Config in messages.
	ConfigPath string
	// ReleaseFrom names where Config's target release came from in
	// messages; default ConfigPath's spec.openshiftRelease.
	ReleaseFrom string
	// Files are the installer's files (nodelist.ReadInstaller).
	Files nodelist.InstallerFiles
	// Nodes is the node list the command uses (--nodes), NodesPath its
	// file; nil when none is given.
	Nodes     []cluster.Node
	NodesPath string
}

// Check is every way the cluster file and the node list disagree with the
// installer's files. Each error's field names the file and its field
// ("install-config.yaml: metadata.name"), its detail the other file's.
func Check(in Input) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, in.loadBalancer()...)
	errs = append(errs, in.names()...)
	errs = append(errs, in.vips()...)
	errs = append(errs, in.machineNetworks()...)
	errs = append(errs, in.agentHosts()...)
	return errs
}

// at is the field of a file, as the messages name it.
func at(file, fieldPath string) string { return file + ": " + fieldPath }

func invalid(file, fieldPath string, value any, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeInvalid, Field: at(file, fieldPath), BadValue: value, Detail: detail}
}

func required(file, fieldPath, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeRequired, Field: at(file, fieldPath), Detail: detail}
}

// mode is spec.mode as a person reads it.
func (in Input) mode() string {
	if in.Config.PoolsOnly() {
		return at(in.ConfigPath, "spec.mode: "+v1alpha1.ModePoolsOnly)
	}
	if in.Config.Spec.Mode == "" {
		return at(in.ConfigPath, "spec.mode: "+v1alpha1.ModeFull+" (the default)")
	}
	return at(in.ConfigPath, "spec.mode: "+v1alpha1.ModeFull)
}

// loadBalancer: in full mode vipctl runs the only keepalived and haproxy
// for the API and ingress VIPs, so OpenShift must run none: a user-managed
// load balancer on baremetal or vSphere, or platform none, which has
// none. With the agent-based installer that takes a release whose
// installer passes the load balancer type on.
func (in Input) loadBalancer() field.ErrorList {
	if in.Config.PoolsOnly() {
		return nil
	}
	f := in.Files
	ic := f.InstallConfig
	switch {
	case len(f.Platforms) == 0:
		return field.ErrorList{required(ic, "platform", fmt.Sprintf("%s has vipctl hold the API and ingress VIPs, on platform baremetal or vsphere with loadBalancer.type: UserManaged, or platform none", in.mode()))}
	case len(f.Platforms) > 1:
		return field.ErrorList{invalid(ic, "platform", strings.Join(f.Platforms, ", "), "one platform, as the installer wants")}
	case f.Platforms[0] == PlatformNone:
		return nil
	case f.OnPrem == nil:
		return field.ErrorList{invalid(ic, "platform", f.Platforms[0], fmt.Sprintf(
			"%s has vipctl hold the API and ingress VIPs in place of the on-premise load balancer OpenShift runs on platform baremetal or vsphere (installed with loadBalancer.type: UserManaged), or on platform none, which has none; platform %s is not one of them",
			in.mode(), f.Platforms[0]))}
	}
	lbField := f.OnPrem.Field + ".loadBalancer.type"
	if f.OnPrem.LoadBalancerType != UserManaged {
		why := fmt.Sprintf("OpenShift then runs its own keepalived and haproxy for the API and ingress VIPs, and %s has vipctl run keepalived for them too: two VRRP speakers would fight over each VIP; install with loadBalancer.type: UserManaged (or platform: none), or set spec.mode: poolsOnly for vipctl to carry only the Service pools beside OpenShift's keepalived", in.mode())
		if f.OnPrem.LoadBalancerType == "" {
			return field.ErrorList{required(ic, lbField, "unset is "+OpenShiftManagedDefault+": "+why)}
		}
		return field.ErrorList{invalid(ic, lbField, f.OnPrem.LoadBalancerType, why)}
	}
	if f.AgentConfig == "" {
		return nil
	}
	release, err := openshiftrelease.Parse(in.Config.Spec.OpenShiftRelease)
	if err != nil || !release.Less(AgentUserManagedSince) {
		return nil // a target the validation refuses already, or one whose installer passes it on
	}
	from := in.ReleaseFrom
	if from == "" {
		from = at(in.ConfigPath, "spec.openshiftRelease")
	}
	return field.ErrorList{invalid(ic, lbField, UserManaged, fmt.Sprintf(
		"the agent-based installer (--agent-config %s) passes it on to the cluster only from OpenShift %s (openshift/installer PR #10558; issue #10108), and %s is %s: the cluster would run OpenShift's own keepalived and haproxy beside vipctl's, two VRRP speakers for each VIP; install with platform: none for an agent-based install of this release",
		f.AgentConfig, AgentUserManagedSince, from, release))}
}

// names: the cluster's name and domain name its DNS records and
// certificates, and the name feeds OpenShift's VRRP IDs, which vipctl's
// avoid or reuse.
func (in Input) names() field.ErrorList {
	var errs field.ErrorList
	f, c := in.Files, in.Config
	if f.ClusterName != c.Metadata.Name {
		errs = append(errs, invalid(f.InstallConfig, "metadata.name", f.ClusterName, fmt.Sprintf(
			"%s is %q: the same cluster name in both (it names the cluster's DNS records, and OpenShift's VRRP IDs are computed from it)",
			at(in.ConfigPath, "metadata.name"), c.Metadata.Name)))
	}
	if c.Spec.BaseDomain != "" && !sameDomain(f.BaseDomain, c.Spec.BaseDomain) {
		errs = append(errs, invalid(f.InstallConfig, "baseDomain", f.BaseDomain, fmt.Sprintf(
			"%s is %q: the same domain in both (api.%s.<baseDomain> and *.apps.%s.<baseDomain> resolve to the VIPs)",
			at(in.ConfigPath, "spec.baseDomain"), c.Spec.BaseDomain, c.Metadata.Name, c.Metadata.Name)))
	}
	return errs
}

func sameDomain(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// vips: in full mode the installer's API and ingress VIPs are the ones
// vipctl holds (the installer writes them into the certificates and the
// nodes' DNS); in poolsOnly mode OpenShift's keepalived holds them, so no
// pool may hand them out. Every VIP of the cluster file sits in one of
// the installer's machine networks, but a routed one (segmentVIPs).
func (in Input) vips() field.ErrorList {
	var errs field.ErrorList
	c, op := in.Config, in.Files.OnPrem
	if op != nil && !c.PoolsOnly() {
		errs = append(errs, in.sameVIPs(op.APIVIPs, c.Spec.API.VIPs, "spec.api.vips")...)
		if i := slices.IndexFunc(c.Spec.Ingress, func(s v1alpha1.IngressSpec) bool { return s.Name == v1alpha1.DefaultIngressController }); i >= 0 {
			errs = append(errs, in.sameVIPs(op.IngressVIPs, c.Spec.Ingress[i].VIPs, fmt.Sprintf("spec.ingress[%d].vips", i))...)
		} else if len(op.IngressVIPs.Values) > 0 {
			errs = append(errs, invalid(in.Files.InstallConfig, op.IngressVIPs.Field, op.IngressVIPs.Values, fmt.Sprintf(
				"%s has no entry named %s: the default IngressController's VIPs are these", at(in.ConfigPath, "spec.ingress"), v1alpha1.DefaultIngressController)))
		}
	}
	if op != nil && c.PoolsOnly() {
		errs = append(errs, in.poolsClearOf(op.APIVIPs)...)
		errs = append(errs, in.poolsClearOf(op.IngressVIPs)...)
	}
	for _, v := range in.segmentVIPs() {
		a, err := netip.ParseAddr(v.value)
		if err != nil || slices.ContainsFunc(in.Files.MachineNetworks, func(p netip.Prefix) bool { return p.Contains(a.Unmap()) }) {
			continue
		}
		errs = append(errs, invalid(in.ConfigPath, v.field, v.value, fmt.Sprintf(
			"outside %s (%s): a VIP must be on the nodes' own network", in.machineNetworkField(), prefixes(in.Files.MachineNetworks))))
	}
	return errs
}

// machineNetworkField names install-config's machine networks.
func (in Input) machineNetworkField() string {
	s := at(in.Files.InstallConfig, "networking.machineNetwork")
	if in.Files.MachineNetworksDefault {
		s += " (none written: the installer's default)"
	}
	return s
}

type fieldValue struct{ field, value string }

// segmentVIPs are the cluster file's API, api-int and ingress VIPs that
// live on the nodes' segment: not those routed (spec.api.routed,
// spec.ingress[].routed), which may lie outside every machine network,
// as the installer allows with loadBalancer.type UserManaged
// (openshift/installer's validation tests, the case
// apivip_v4_not_in_machinenetwork_cidr_usermanaged_loadbalancer).
func (in Input) segmentVIPs() []fieldValue {
	var out []fieldValue
	add := func(path string, vips []string) {
		for i, v := range vips {
			out = append(out, fieldValue{fmt.Sprintf("%s[%d]", path, i), v})
		}
	}
	s := in.Config.Spec
	if !s.API.Routed {
		add("spec.api.vips", s.API.VIPs)
		add("spec.api.internalVIPs", s.API.InternalVIPs)
	}
	for i, ing := range s.Ingress {
		if !ing.Routed {
			add(fmt.Sprintf("spec.ingress[%d].vips", i), ing.VIPs)
		}
	}
	return out
}

// sameVIPs: the installer's VIPs and the cluster file's are one set.
func (in Input) sameVIPs(installer nodelist.FieldValues, vips []string, clusterField string) field.ErrorList {
	if len(installer.Values) == 0 {
		return nil // the installer refuses an on-premise platform without
	}
	if sameAddrs(installer.Values, vips) {
		return nil
	}
	return field.ErrorList{invalid(in.Files.InstallConfig, installer.Field, installer.Values, fmt.Sprintf(
		"%s is %s: the same addresses in both: the installer writes these into the certificates and the nodes' DNS records, vipctl holds those",
		at(in.ConfigPath, clusterField), list(vips)))}
}

// poolsClearOf: no pool holds one of OpenShift's own VIPs.
func (in Input) poolsClearOf(installer nodelist.FieldValues) field.ErrorList {
	var errs field.ErrorList
	for j, v := range installer.Values {
		a, err := netip.ParseAddr(v)
		if err != nil {
			continue
		}
		for i, p := range in.Config.Spec.ServicePools {
			for k, s := range p.Addresses {
				r, err := v1alpha1.ParseAddressRange(s)
				if err != nil || !r.Contains(a.Unmap()) {
					continue
				}
				errs = append(errs, invalid(in.ConfigPath, fmt.Sprintf("spec.servicePools[%d].addresses[%d]", i, k), s, fmt.Sprintf(
					"holds %s, %s[%d]: in %s OpenShift's own keepalived holds that address; a Service given it would fight it",
					a, at(in.Files.InstallConfig, installer.Field), j, in.mode())))
			}
		}
	}
	return errs
}

// machineNetworks: the cluster file's machine networks, when it names any,
// are the installer's.
func (in Input) machineNetworks() field.ErrorList {
	mine := in.Config.Spec.MachineNetworks
	if len(mine) == 0 {
		return nil
	}
	var ours []netip.Prefix
	for _, s := range mine {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil // the cluster file's validation names it
		}
		ours = append(ours, p.Masked())
	}
	if samePrefixes(ours, in.Files.MachineNetworks) {
		return nil
	}
	return field.ErrorList{invalid(in.Files.InstallConfig, "networking.machineNetwork", prefixes(in.Files.MachineNetworks), fmt.Sprintf(
		"%s is %s: the same networks in both%s",
		at(in.ConfigPath, "spec.machineNetworks"), list(mine), defaultNote(in.Files.MachineNetworksDefault)))}
}

func defaultNote(defaulted bool) string {
	if defaulted {
		return " (install-config names none: the installer's default)"
	}
	return ""
}

// agentHosts: the node list holds every host the agent-based installer
// installs, and the rendezvous host, which bootstraps the cluster in place
// and becomes one of its control-plane nodes, is a control-plane node of
// it.
func (in Input) agentHosts() field.ErrorList {
	f := in.Files
	if f.AgentConfig == "" || in.Nodes == nil {
		return nil
	}
	var errs field.ErrorList
	byName := map[string]cluster.Node{}
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	for _, h := range f.AgentHosts {
		if h.Hostname == "" {
			continue // named by DHCP: nothing to compare
		}
		if _, ok := byName[strings.ToLower(h.Hostname)]; !ok {
			errs = append(errs, invalid(f.AgentConfig, h.Field+".hostname", h.Hostname, fmt.Sprintf(
				"no node of %s (--nodes) has this name (items[].metadata.name): the node list holds every host the installer installs, under the name its Node will have",
				in.NodesPath)))
		}
	}
	if f.RendezvousIP == "" {
		return errs
	}
	rendezvous, err := netip.ParseAddr(f.RendezvousIP)
	if err != nil {
		return append(errs, invalid(f.AgentConfig, "rendezvousIP", f.RendezvousIP, "not an IP address"))
	}
	why := "the rendezvous host bootstraps the cluster in place and becomes a control-plane node: it must be one of the list's control-plane nodes, whose API VIP comes up before the API does"
	for _, n := range in.Nodes {
		if !slices.Contains(n.Addresses, rendezvous.Unmap()) {
			continue
		}
		if !n.ControlPlane {
			errs = append(errs, invalid(f.AgentConfig, "rendezvousIP", f.RendezvousIP, fmt.Sprintf(
				"%s: node %s has this address and is no control-plane node: %s", in.NodesPath, n.Name, why)))
		}
		return errs
	}
	return append(errs, invalid(f.AgentConfig, "rendezvousIP", f.RendezvousIP, fmt.Sprintf(
		"no node of %s (--nodes) has this address (items[].status.addresses): %s", in.NodesPath, why)))
}

// sameAddrs: two lists of addresses are one set, however each is spelt.
func sameAddrs(a, b []string) bool {
	set := func(l []string) []netip.Addr {
		var out []netip.Addr
		for _, s := range l {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return nil
			}
			out = append(out, ip.Unmap())
		}
		slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
		return slices.Compact(out)
	}
	x, y := set(a), set(b)
	return x != nil && y != nil && slices.Equal(x, y)
}

func samePrefixes(a, b []netip.Prefix) bool {
	norm := func(l []netip.Prefix) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = p.Masked().String()
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

func prefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}

// list writes a cluster file's list as YAML's flow style does.
func list(l []string) string { return "[" + strings.Join(l, ", ") + "]" }
