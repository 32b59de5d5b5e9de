package v1alpha1

import (
	"fmt"
	"math/big"
	"net/netip"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// InstanceKeys lists every VRRP instance key of the cluster in declaration
// order, which is the order VRRP IDs are derived in (appending is stable).
// In mode poolsOnly the API instance is OpenShift's, not vipctl's.
func (c *ClusterVIPs) InstanceKeys() []InstanceKey {
	var keys []InstanceKey
	if !c.PoolsOnly() {
		keys = append(keys, KeyAPI)
	}
	for _, in := range c.Spec.Ingress {
		keys = append(keys, IngressKey(in.Name))
	}
	for _, p := range c.Spec.ServicePools {
		if p.IsBGP() {
			continue // announced by BGP: no VRRP instance
		}
		for n := 0; n < p.Instances; n++ {
			keys = append(keys, PoolKey(p.Name, n))
		}
	}
	// Last: added to a running cluster, it moves no other instance's ID.
	if len(c.Spec.API.InternalVIPs) > 0 {
		keys = append(keys, KeyAPIInternal)
	}
	return keys
}

// imageRef is deliberately narrower than the OCI grammar: image references
// land in YAML and shell-adjacent places, so quotes, spaces and control
// characters are refused outright.
var imageRef = regexp.MustCompile(`^[a-z0-9]+([._/:@-][A-Za-z0-9_.-]+)*(:[A-Za-z0-9_.-]+)?(@sha256:[a-f0-9]{64})?$`)

// ifaceName follows the kernel's rules (dev_valid_name) minus the characters
// that would need quoting in keepalived.conf.
var ifaceName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// InterfaceNameError says why name cannot be a VRRP interface, or "" when
// it can. spec.vrrp.interface and a Node's vipctl.io/interface annotation
// both land in keepalived.conf and are checked by this one rule.
func InterfaceNameError(name string) string {
	if !ifaceName.MatchString(name) || name == "." || name == ".." {
		return fmt.Sprintf("must be a network interface name: 1-%d of A-Z a-z 0-9 _ . -", maxInterfaceNameLength)
	}
	return ""
}

// Validate checks a defaulted config and returns every problem found.
func Validate(c *ClusterVIPs) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if c.Metadata.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "the OpenShift cluster name"))
	} else {
		for _, m := range validation.IsDNS1123Label(c.Metadata.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), c.Metadata.Name, m))
		}
	}
	spec := field.NewPath("spec")
	s := &c.Spec
	if s.BaseDomain == "" {
		errs = append(errs, field.Required(spec.Child("baseDomain"), ""))
	} else {
		for _, m := range validation.IsDNS1123Subdomain(s.BaseDomain) {
			errs = append(errs, field.Invalid(spec.Child("baseDomain"), s.BaseDomain, m))
		}
	}

	v := validator{spec: s, metricsPortSet: s.Monitoring != nil && s.Monitoring.Port != 0, defaultDomain: defaultIngressDomainPrefix + c.ClusterDomain()}
	errs = append(errs, v.machineNetworks(s.MachineNetworks, spec.Child("machineNetworks"))...)
	switch s.Mode {
	case "", ModeFull:
		errs = append(errs, v.api(&s.API, spec.Child("api"))...)
		errs = append(errs, internalGuard(s, spec)...)
		errs = append(errs, v.bootstrap(s, spec.Child("bootstrap"))...)
		errs = append(errs, v.ingress(s.Ingress, spec.Child("ingress"), len(validation.IsDNS1123Label(c.Metadata.Name)) == 0)...)
	case ModePoolsOnly:
		errs = append(errs, poolsOnly(s, spec)...)
	default:
		errs = append(errs, field.NotSupported(spec.Child("mode"), s.Mode, []string{ModeFull, ModePoolsOnly}))
	}
	errs = append(errs, v.pools(s.ServicePools, spec.Child("servicePools"))...)
	errs = append(errs, specialPools(s.ServicePools, spec.Child("servicePools"))...)
	errs = append(errs, v.dnsNames(c, spec)...)
	errs = append(errs, v.vipsOutsidePools()...)
	errs = append(errs, reservedVIPs(c, c.ReservedAddresses(nil))...)
	errs = append(errs, validateVRRP(c, spec.Child("vrrp"))...)
	errs = append(errs, validateBGP(c, spec.Child("bgp"))...)
	errs = append(errs, validateImages(&s.Images, spec.Child("images"))...)
	errs = append(errs, validateMonitoring(s.Monitoring, spec.Child("monitoring"))...)
	errs = append(errs, validateLoadBalancerClass(s.LoadBalancerClass, spec.Child("loadBalancerClass"))...)
	if s.Monitoring != nil {
		errs = append(errs, v.monitoringPort(s.Monitoring.Port, spec.Child("monitoring", "port"))...)
	}
	if _, err := openshiftrelease.Parse(s.OpenShiftRelease); err != nil {
		errs = append(errs, field.Invalid(spec.Child("openshiftRelease"), s.OpenShiftRelease, err.Error()))
	}
	return errs
}

// validator carries what one part of the config needs to check another:
// the machine networks for every VIP, every VIP seen so far for duplicates.
type validator struct {
	spec     *ClusterVIPsSpec
	networks []netip.Prefix
	vips     []seenVIP
	ranges   []seenRange
	// ports are the configured ports the nodes bind, for a clash with
	// spec.monitoring.port (metricsPortSet).
	ports          []seenPort
	metricsPortSet bool
	// defaultDomain is the default IngressController's domain as
	// SetDefaults derives it: judged through metadata.name and
	// spec.baseDomain, not a second time as a domain.
	defaultDomain string
}

// derivedDomain tells whether in's domain is the one SetDefaults derives.
func (v *validator) derivedDomain(in *IngressSpec) bool {
	return in.Name == DefaultIngressController && in.Domain == v.defaultDomain
}

type seenVIP struct {
	addr netip.Addr
	path *field.Path
}

type seenRange struct {
	r    AddressRange
	path *field.Path
}

func (v *validator) machineNetworks(nets []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(nets) == 0 {
		return append(errs, field.Required(path, "at least one node subnet, e.g. 198.51.100.0/24"))
	}
	for i, n := range nets {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), n, "invalid CIDR"))
			continue
		}
		if p.Masked() != p {
			errs = append(errs, field.Invalid(path.Index(i), n, "invalid CIDR: host bits set, did you mean "+p.Masked().String()))
			continue
		}
		v.networks = append(v.networks, p)
	}
	return errs
}

// vipList checks a list of VIPs: valid, one per family, inside a machine
// network unless they live on an interface of their own or are routed
// (anywhere), never used twice anywhere in the config.
func (v *validator) vipList(vips []string, path *field.Path, anywhere bool) field.ErrorList {
	var errs field.ErrorList
	families := map[bool]int{}
	for i, s := range vips {
		p := path.Index(i)
		a, err := parseAddr(s)
		if err != nil {
			errs = append(errs, field.Invalid(p, s, err.Error()))
			continue
		}
		if prev, dup := families[a.Is4()]; dup {
			errs = append(errs, field.Invalid(p, s, fmt.Sprintf("a second %s VIP; %s already has one (one VIP per family)", familyName(a), path.Index(prev))))
		}
		families[a.Is4()] = i
		if sr, bad := specialOf(AddressRange{First: a, Last: a}); bad {
			errs = append(errs, field.Invalid(p, s, "not a usable unicast address: in "+sr.String()))
			continue
		}
		for _, seen := range v.vips {
			if seen.addr == a {
				errs = append(errs, field.Duplicate(p, s+" (also "+seen.path.String()+")"))
			}
		}
		v.vips = append(v.vips, seenVIP{addr: a, path: p})
		if !anywhere && !v.inMachineNetwork(AddressRange{First: a, Last: a}) && len(v.networks) > 0 {
			errs = append(errs, field.Invalid(p, s, "outside every machine network ("+v.networkList()+")"))
		}
	}
	return errs
}

func (v *validator) inMachineNetwork(r AddressRange) bool {
	_, ok := v.networkOf(r)
	return ok
}

func (v *validator) networkList() string {
	s := make([]string, len(v.networks))
	for i, n := range v.networks {
		s[i] = n.String()
	}
	return strings.Join(s, ", ")
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// poolsOnly refuses what OpenShift's own keepalived carries in mode
// poolsOnly: a second VRRP speaker for the same VIP would fight it.
func poolsOnly(s *ClusterVIPsSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !reflect.DeepEqual(s.API, APISpec{}) {
		errs = append(errs, field.Forbidden(spec.Child("api"), "mode poolsOnly: OpenShift's own keepalived and haproxy carry the API VIP; leave spec.api out (or use mode full on a cluster installed with a user-managed load balancer)"))
	}
	if len(s.Ingress) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ingress"), "mode poolsOnly: OpenShift's own keepalived carries the ingress VIP; leave spec.ingress out"))
	}
	if s.Bootstrap != nil {
		errs = append(errs, field.Forbidden(spec.Child("bootstrap"), "mode poolsOnly: vipctl holds no API VIP for a bootstrap host to bridge; OpenShift's own keepalived does that during its install"))
	}
	return errs
}

func validatePort(p int32, path *field.Path) field.ErrorList {
	if p < 1 || p > 65535 {
		return field.ErrorList{field.Invalid(path, p, "must be between 1 and 65535")}
	}
	return nil
}

// ingress checks the IngressControllers. validName says whether the default
// controller's domain could be derived; if not, the name's own error says
// why and a missing domain is not reported twice.
func (v *validator) ingress(list []IngressSpec, path *field.Path, validName bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i := range list {
		in := &list[i]
		p := path.Index(i)
		errs = append(errs, validateName(in.Name, p.Child("name"))...)
		if prev, dup := names[in.Name]; dup && in.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), in.Name+" (also "+path.Index(prev).Child("name").String()+")"))
		}
		names[in.Name] = i
		switch {
		case in.Domain == "" && !validName && in.Name == DefaultIngressController:
			// Left empty by defaulting because metadata.name is invalid.
		case in.Domain == "":
			errs = append(errs, field.Required(p.Child("domain"), "the domain this IngressController serves (only \"default\" has one by default)"))
		case v.derivedDomain(in):
		default:
			for _, m := range validation.IsDNS1123Subdomain(in.Domain) {
				errs = append(errs, field.Invalid(p.Child("domain"), in.Domain, m))
			}
		}
		if len(in.VIPs) == 0 {
			errs = append(errs, field.Required(p.Child("vips"), "one VIP per IP family"))
		}
		errs = append(errs, v.vipList(in.VIPs, p.Child("vips"), in.VIPInterface().Own() || in.Routed)...)
		errs = append(errs, v.vipInterface(in.VIPInterface(), parsedAddrs(in.VIPs), p)...)
		errs = append(errs, validateName(in.RouterNamespace, p.Child("routerNamespace"))...)
		errs = append(errs, validateLabels(in.RouterSelector, p.Child("routerSelector"))...)
		errs = append(errs, validateLabels(in.NodeSelector, p.Child("nodeSelector"))...)
		errs = append(errs, validatePort(in.HealthPort, p.Child("healthPort"))...)
		errs = append(errs, v.nodePort(in.HealthPort, p.Child("healthPort"), probes)...)
	}
	return errs
}

func (v *validator) pools(list []ServicePool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i := range list {
		pool := &list[i]
		p := path.Index(i)
		errs = append(errs, validateName(pool.Name, p.Child("name"))...)
		if prev, dup := names[pool.Name]; dup && pool.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), pool.Name+" (also "+path.Index(prev).Child("name").String()+")"))
		}
		names[pool.Name] = i
		bgp := pool.IsBGP()
		if pool.Mode != PoolModeVRRP && !bgp {
			errs = append(errs, field.NotSupported(p.Child("mode"), pool.Mode, []string{PoolModeVRRP, PoolModeBGP}))
		}
		switch {
		case bgp && pool.Announce != "":
			errs = append(errs, field.Invalid(p.Child("announce"), pool.Announce, "only for mode vrrp: a bgp pool's routes are announced by FRR"))
		case !bgp && pool.Announce != "" && pool.Announce != AnnounceKeepalived && pool.Announce != AnnounceSidecar:
			errs = append(errs, field.NotSupported(p.Child("announce"), pool.Announce, []string{AnnounceKeepalived, AnnounceSidecar}))
		}
		if len(pool.Addresses) == 0 {
			errs = append(errs, field.Required(p.Child("addresses"), "CIDRs or ranges"))
		}
		own := pool.VIPInterface().Own()
		errs = append(errs, v.poolInterface(pool, p)...)
		firstRange := len(v.ranges)
		for j, a := range pool.Addresses {
			ap := p.Child("addresses").Index(j)
			r, err := ParseAddressRange(a)
			if err != nil {
				errs = append(errs, field.Invalid(ap, a, err.Error()))
				continue
			}
			for _, seen := range v.ranges {
				if seen.r.Overlaps(r) {
					errs = append(errs, field.Invalid(ap, a, "overlaps "+seen.path.String()))
				}
			}
			v.ranges = append(v.ranges, seenRange{r: r, path: ap})
			// A bgp pool is routed to the nodes, so it may (and usually
			// does) lie outside every node subnet.
			if len(v.networks) > 0 && !bgp && !own && !v.inMachineNetwork(r) {
				errs = append(errs, field.Invalid(ap, a, "not inside one machine network ("+v.networkList()+"): keepalived announces pool addresses on the node's own L2 segment (set interface for another one)"))
			}
		}
		if !bgp && !own {
			errs = append(errs, v.onePoolNetworkPerFamily(v.ranges[firstRange:])...)
		}
		errs = append(errs, validateLabels(pool.NodeSelector, p.Child("nodeSelector"))...)
		errs = append(errs, validateLabels(pool.ServiceSelector, p.Child("serviceSelector"))...)
		for j, ns := range pool.Namespaces {
			errs = append(errs, validateName(ns, p.Child("namespaces").Index(j))...)
		}
		if pool.MaxPerNamespace < 0 {
			errs = append(errs, field.Invalid(p.Child("maxPerNamespace"), pool.MaxPerNamespace, "must be 0 (no cap) or more"))
		}
		if pool.MaxHolders < 2 {
			errs = append(errs, field.Invalid(p.Child("maxHolders"), pool.MaxHolders, "must be at least 2: one holder and one backup"))
		}
		if pool.Instances < 1 || pool.Instances > maxPoolInstancesPerFamily {
			errs = append(errs, field.Invalid(p.Child("instances"), pool.Instances, fmt.Sprintf("must be between 1 and %d", maxPoolInstancesPerFamily)))
		} else if !bgp {
			errs = append(errs, anchorsFit(pool, v.ranges[firstRange:])...)
		}
	}
	return errs
}

// anchorsFit checks that the last range of each family leaves at least one
// address for Services after the instances' anchors (see Anchors).
func anchorsFit(pool *ServicePool, ranges []seenRange) field.ErrorList {
	var errs field.ErrorList
	last := map[bool]seenRange{}
	for _, r := range ranges {
		last[r.r.Is4()] = r
	}
	for _, fam := range []bool{true, false} {
		r, ok := last[fam]
		if ok && r.r.Size().Cmp(big.NewInt(int64(pool.Instances))) <= 0 {
			errs = append(errs, field.Invalid(r.path, r.r.String(), fmt.Sprintf("too small: its last %d address(es) anchor the pool's VRRP instances (one each) and at least one must be left for Services", pool.Instances)))
		}
	}
	return errs
}

// onePoolNetworkPerFamily keeps a pool's addresses of one family on one L2
// segment: a VRRP instance lives on one segment, and the nodes that can hold
// the pool's VIPs are those with an address there.
func (v *validator) onePoolNetworkPerFamily(ranges []seenRange) field.ErrorList {
	var errs field.ErrorList
	first := map[bool]netip.Prefix{}
	for _, r := range ranges {
		n, ok := v.networkOf(r.r)
		if !ok {
			continue
		}
		if prev, seen := first[r.r.Is4()]; seen && prev != n {
			errs = append(errs, field.Invalid(r.path, r.r.String(), fmt.Sprintf("in machine network %s, but the pool's other %s addresses are in %s: use one pool per segment", n, familyName(r.r.First), prev)))
			continue
		}
		first[r.r.Is4()] = n
	}
	return errs
}

func (v *validator) networkOf(r AddressRange) (netip.Prefix, bool) {
	for _, n := range v.networks {
		if r.Within(n) {
			return n, true
		}
	}
	return netip.Prefix{}, false
}

// vipsOutsidePools runs after both lists are known: an API or ingress VIP
// inside a pool would be handed to a Service as well.
func (v *validator) vipsOutsidePools() field.ErrorList {
	var errs field.ErrorList
	for _, vip := range v.vips {
		for _, pool := range v.ranges {
			if pool.r.Contains(vip.addr) {
				errs = append(errs, field.Invalid(vip.path, vip.addr.String(), "inside service pool "+pool.path.String()))
			}
		}
	}
	return errs
}

// validateName checks a required name that must be a DNS-1123 label.
func validateName(name string, path *field.Path) field.ErrorList {
	return validateNameBy(validation.IsDNS1123Label, name, path)
}

// validateNameBy checks a required name by one of Kubernetes' rules.
func validateNameBy(rule func(string) []string, name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, m := range rule(name) {
		errs = append(errs, field.Invalid(path, name, m))
	}
	return errs
}

func validateLabels(labels map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, m := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Key(k), k, m))
		}
		for _, m := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(path.Key(k), labels[k], m))
		}
	}
	return errs
}

func validateVRRP(c *ClusterVIPs, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	v := &c.Spec.VRRP
	if v.Mode != ModeUnicast && v.Mode != ModeMulticast {
		errs = append(errs, field.NotSupported(path.Child("mode"), v.Mode, []string{ModeUnicast, ModeMulticast}))
	}
	if v.Profile != ProfileDefault && v.Profile != ProfileFast {
		errs = append(errs, field.NotSupported(path.Child("profile"), v.Profile, []string{ProfileDefault, ProfileFast}))
	}
	if v.Version != 2 && v.Version != 3 {
		errs = append(errs, field.NotSupported(path.Child("version"), v.Version, []string{"2", "3"}))
	}
	if v.Profile == ProfileFast && v.Version == 2 {
		errs = append(errs, field.Invalid(path.Child("version"), v.Version, "the fast profile needs VRRPv3 (VRRPv2 cannot advertise more often than once a second)"))
	}
	errs = append(errs, validateAdvert(v, path.Child("advertInterval"))...)
	if msg := InterfaceNameError(v.Interface); msg != "" {
		errs = append(errs, field.Invalid(path.Child("interface"), v.Interface, msg))
	}

	known := map[InstanceKey]bool{}
	for _, k := range c.InstanceKeys() {
		known[k] = true
	}
	keys := make([]string, 0, len(v.VirtualRouterIDs))
	for k := range v.VirtualRouterIDs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byID := map[int]string{}
	for _, k := range keys {
		id := v.VirtualRouterIDs[k]
		p := path.Child("virtualRouterIDs").Key(k)
		if !known[InstanceKey(k)] {
			errs = append(errs, field.Invalid(p, k, "no such VRRP instance; known: "+strings.Join(Strings(c.InstanceKeys()), ", ")))
		}
		if id < 1 || id > maxVirtualRouterID {
			errs = append(errs, field.Invalid(p, id, "must be between 1 and 255"))
			continue
		}
		if other, dup := byID[id]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%d (also %s)", id, path.Child("virtualRouterIDs").Key(other))))
		}
		byID[id] = k
	}
	avoid := map[int]int{}
	for i, id := range v.AvoidVirtualRouterIDs {
		p := path.Child("avoidVirtualRouterIDs").Index(i)
		if id < 1 || id > maxVirtualRouterID {
			errs = append(errs, field.Invalid(p, id, "must be between 1 and 255"))
			continue
		}
		if prev, dup := avoid[id]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%d (also %s)", id, path.Child("avoidVirtualRouterIDs").Index(prev))))
		}
		avoid[id] = i
		if k, pinned := byID[id]; pinned {
			errs = append(errs, field.Invalid(p, id, "also pinned by "+path.Child("virtualRouterIDs").Key(k).String()))
		}
	}
	return errs
}

// validateAdvert enforces what keepalived would otherwise silently change:
// VRRPv2 rounds sub-second intervals up to 1 s, VRRPv3 counts centiseconds.
func validateAdvert(v *VRRPSpec, path *field.Path) field.ErrorList {
	d, err := time.ParseDuration(v.AdvertInterval)
	if err != nil {
		return field.ErrorList{field.Invalid(path, v.AdvertInterval, "must be a duration such as 1s or 200ms")}
	}
	if v.Version == 2 {
		if d%time.Second != 0 || d < time.Second || d > maxVRRPv2AdvertSeconds*time.Second {
			return field.ErrorList{field.Invalid(path, v.AdvertInterval, "VRRPv2 needs whole seconds from 1s to 255s; use version 3 for sub-second adverts")}
		}
		return nil
	}
	if d < minVRRPv3Advert || d > maxVRRPv3Advert || d%vrrpv3AdvertGranularity != 0 {
		return field.ErrorList{field.Invalid(path, v.AdvertInterval, "VRRPv3 needs 10ms to 40.95s in steps of 10ms")}
	}
	return nil
}

func validateImages(im *Images, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, i := range im.fields() {
		if !imageRef.MatchString(i.ref) || len(i.ref) > 512 {
			errs = append(errs, field.Invalid(path.Child(i.name), i.ref, "not a container image reference (registry/name:tag or @sha256:digest)"))
		}
	}
	return errs
}
