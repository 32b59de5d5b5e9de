package v1alpha1

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// wellKnownCommunities are the names FRR accepts besides "AA:NN".
var wellKnownCommunities = []string{"no-export", "no-advertise", "local-AS"}

// validateBGP checks spec.bgp, and that it is there when a pool needs it.
func validateBGP(c *ClusterVIPs, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range c.Spec.ServicePools {
		if p.BGP != nil && !p.IsBGP() {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "servicePools").Index(i).Child("bgp"),
				"only for mode bgp: a vrrp pool's addresses are held by keepalived, not routed"))
		}
	}
	errs = append(errs, validateRouted(c)...)
	b := c.Spec.BGP
	if b == nil {
		if what := c.routedVIPs(); what != "" {
			errs = append(errs, field.Required(path, what+": name the nodes' ASN and the peers the VIPs are announced to"))
		}
		for i, p := range c.Spec.ServicePools {
			if p.IsBGP() {
				errs = append(errs, field.Required(path, "spec.servicePools["+strconv.Itoa(i)+"] has mode bgp: name the nodes' ASN and their peers"))
				break
			}
		}
		return errs
	}
	if b.ASN == 0 {
		errs = append(errs, field.Required(path.Child("asn"), "the nodes' AS number (1-4294967295; private: 64512-65534, 4200000000-4294967294)"))
	}
	if len(b.Peers) == 0 {
		errs = append(errs, field.Required(path.Child("peers"), "at least one router to announce to"))
	}
	seen := map[netip.Addr]int{}
	for i := range b.Peers {
		peer := &b.Peers[i]
		p := path.Child("peers").Index(i)
		if peer.Unnumbered() || peer.Address == "" {
			errs = append(errs, validateUnnumbered(peer, p)...)
		} else if a, err := parseAddr(peer.Address); err != nil {
			errs = append(errs, field.Invalid(p.Child("address"), peer.Address, err.Error()))
		} else {
			if why := peerAddress(c, a); why != "" {
				errs = append(errs, field.Invalid(p.Child("address"), peer.Address, why))
			}
			if prev, dup := seen[a]; dup {
				errs = append(errs, field.Duplicate(p.Child("address"), peer.Address+" (also "+path.Child("peers").Index(prev).Child("address").String()+")"))
			}
			seen[a] = i
		}
		if peer.ASN == 0 {
			errs = append(errs, field.Required(p.Child("asn"), "the router's AS number"))
		}
		hold, herr := bgpTimer(peer.HoldTime)
		if herr != "" {
			errs = append(errs, field.Invalid(p.Child("holdTime"), peer.HoldTime, herr))
		} else if hold < minBGPHoldTime {
			errs = append(errs, field.Invalid(p.Child("holdTime"), peer.HoldTime, "must be at least 3s (RFC 4271)"))
		}
		keep, kerr := bgpTimer(peer.KeepaliveTime)
		switch {
		case kerr != "":
			errs = append(errs, field.Invalid(p.Child("keepaliveTime"), peer.KeepaliveTime, kerr))
		case keep < time.Second:
			errs = append(errs, field.Invalid(p.Child("keepaliveTime"), peer.KeepaliveTime, "must be at least 1s"))
		case herr == "" && keep >= hold:
			errs = append(errs, field.Invalid(p.Child("keepaliveTime"), peer.KeepaliveTime, "must be less than holdTime "+peer.HoldTime))
		}
		errs = append(errs, validateLabels(peer.NodeSelector, p.Child("nodeSelector"))...)
		switch hops := path.Child("peers").Index(i).Child("ebgpMultihop"); {
		case peer.EBGPMultihop == 0:
		case peer.EBGPMultihop == 1 || peer.EBGPMultihop < 0 || peer.EBGPMultihop > 255:
			errs = append(errs, field.Invalid(hops, peer.EBGPMultihop, "must be 2 to 255 (the hops to the router plus one), or left out for a router on the nodes' subnet"))
		case peer.ASN == b.ASN:
			errs = append(errs, field.Invalid(hops, peer.EBGPMultihop, "only for eBGP: this peer's asn is spec.bgp.asn (iBGP), whose sessions go any number of hops"))
		}
		if peer.PasswordSecret != "" {
			errs = append(errs, validateNameBy(validation.IsDNS1123Subdomain, peer.PasswordSecret, p.Child("passwordSecret"))...)
		}
	}
	errs = append(errs, sameLinkTwice(b.Peers, path.Child("peers"))...)
	errs = append(errs, familiesPeered(c, path.Child("peers"))...)
	for i := range c.Spec.ServicePools {
		errs = append(errs, validatePoolBGP(c, i, field.NewPath("spec", "servicePools").Index(i).Child("bgp"))...)
	}
	if b.GracefulRestartTime != "" {
		if d, msg := bgpTimer(b.GracefulRestartTime); msg != "" || d < time.Second || d > maxGracefulRestartTime {
			errs = append(errs, field.Invalid(path.Child("gracefulRestartTime"), b.GracefulRestartTime, "must be whole seconds, 1s to 4095s"))
		}
	}
	for i, cm := range b.Communities {
		if msg := communityError(cm); msg != "" {
			errs = append(errs, field.Invalid(path.Child("communities").Index(i), cm, msg))
		}
	}
	return errs
}

// BGPPasswordSecrets are the Secrets spec.bgp.peers name for their
// passwords, sorted, each once.
func (c *ClusterVIPs) BGPPasswordSecrets() []string {
	if c.Spec.BGP == nil {
		return nil
	}
	var out []string
	for _, p := range c.Spec.BGP.Peers {
		if p.PasswordSecret != "" && !slices.Contains(out, p.PasswordSecret) {
			out = append(out, p.PasswordSecret)
		}
	}
	slices.Sort(out)
	return out
}

// BGPPasswordKey is the key of a peer's passwordSecret that holds the
// password, as in MetalLB's BGPPeer passwordSecret (a kubernetes.io/basic-auth
// Secret's password).
const BGPPasswordKey = "password"

// MaxBGPPasswordLen is the longest TCP MD5 key Linux takes
// (TCP_MD5SIG_MAXKEYLEN).
const MaxBGPPasswordLen = 80

// CheckBGPPassword says what is wrong with a peer's password, "" when
// nothing: FRR takes it on one frr.conf line, so 1 to MaxBGPPasswordLen
// printable ASCII characters without blanks.
func CheckBGPPassword(pw []byte) string {
	if len(pw) == 0 || len(pw) > MaxBGPPasswordLen {
		return fmt.Sprintf("must be 1 to %d characters, not %d", MaxBGPPasswordLen, len(pw))
	}
	for _, b := range pw {
		if b <= ' ' || b > '~' {
			return "must be printable ASCII without blanks"
		}
	}
	return ""
}

// familiesPeered refuses a bgp pool address of a family no peer speaks:
// prefixes go to peers of their own family (docs/bgp.md), so such an
// address would be handed to a Service and announced nowhere.
func familiesPeered(c *ClusterVIPs, peersPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	peered := families(c.Spec.BGP.Peers)
	if len(peered) == 0 {
		return nil // no valid peer: reported on its own
	}
	for i, pool := range c.Spec.ServicePools {
		if !pool.IsBGP() {
			continue
		}
		for j, a := range pool.Addresses {
			r, err := ParseAddressRange(a)
			if err == nil && !peered[r.Is4()] {
				errs = append(errs, field.Invalid(field.NewPath("spec", "servicePools").Index(i).Child("addresses").Index(j), a,
					fmt.Sprintf("no %s peer in %s to announce it to", familyName(r.First), peersPath)))
			}
		}
	}
	return errs
}

// bgpTimer parses a BGP timer: FRR takes whole seconds up to 65535.
func bgpTimer(s string) (time.Duration, string) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, "not a duration, e.g. 9s"
	}
	if d%time.Second != 0 || d > maxBGPTimer {
		return 0, "must be whole seconds, at most 65535s"
	}
	return d, ""
}

func communityError(cm string) string {
	for _, w := range wellKnownCommunities {
		if cm == w {
			return ""
		}
	}
	as, val, ok := strings.Cut(cm, ":")
	if ok {
		a, err1 := strconv.ParseUint(as, 10, 16)
		v, err2 := strconv.ParseUint(val, 10, 16)
		if err1 == nil && err2 == nil && a <= 65535 && v <= 65535 {
			return ""
		}
	}
	return fmt.Sprintf("must be AA:NN (each 0-65535) or one of %s", strings.Join(wellKnownCommunities, ", "))
}

// validatePoolBGP checks servicePools[i].bgp, a bgp pool's routing policy,
// against spec.bgp (which is there: validateBGP checks that first).
func validatePoolBGP(c *ClusterVIPs, i int, path *field.Path) field.ErrorList {
	pool := &c.Spec.ServicePools[i]
	pb := pool.BGP
	if pb == nil || !pool.IsBGP() {
		return nil // a vrrp pool's bgp is refused on its own
	}
	var errs field.ErrorList
	peers := pb.PeerSet(c.Spec.BGP)
	for j, a := range pb.Peers {
		_, err := parseAddr(a)
		switch {
		case slices.ContainsFunc(c.Spec.BGP.Peers, func(p BGPPeer) bool { return p.Is(a) }):
		case err != nil && InterfaceNameError(a) != "":
			errs = append(errs, field.Invalid(path.Child("peers").Index(j), a, err.Error()+", nor an unnumbered peer's interface"))
		default:
			errs = append(errs, field.NotFound(path.Child("peers").Index(j), a+" is no peer of spec.bgp.peers"))
		}
	}
	if len(pb.Peers) > 0 && len(errs) == 0 {
		errs = append(errs, poolFamiliesPeered(pool, peers, path.Child("peers"))...)
	}
	for j, cm := range pb.Communities {
		if msg := communityError(cm); msg != "" {
			errs = append(errs, field.Invalid(path.Child("communities").Index(j), cm, msg))
		}
	}
	for j, cm := range pb.LargeCommunities {
		if msg := largeCommunityError(cm); msg != "" {
			errs = append(errs, field.Invalid(path.Child("largeCommunities").Index(j), cm, msg))
		}
	}
	switch {
	case pb.LocalPref == nil:
	case *pb.LocalPref == 0:
		errs = append(errs, field.Invalid(path.Child("localPref"), *pb.LocalPref, "must be at least 1: backup routes go to iBGP peers at 0"))
	case !slices.ContainsFunc(peers, func(p BGPPeer) bool { return p.ASN == c.Spec.BGP.ASN }):
		errs = append(errs, field.Invalid(path.Child("localPref"), *pb.LocalPref,
			"reaches iBGP peers alone (asn equal to spec.bgp.asn), and none of the pool's peers is one: eBGP peers never receive LOCAL_PREF (RFC 4271)"))
	}
	switch {
	case pb.ASPathPrepend < 0 || pb.ASPathPrepend > maxASPathPrepend:
		errs = append(errs, field.Invalid(path.Child("asPathPrepend"), pb.ASPathPrepend, fmt.Sprintf("must be 0 to %d", maxASPathPrepend)))
	case pb.ASPathPrepend > 0 && slices.ContainsFunc(peers, func(p BGPPeer) bool { return p.ASN == c.Spec.BGP.ASN }):
		errs = append(errs, field.Invalid(path.Child("asPathPrepend"), pb.ASPathPrepend,
			"an iBGP peer among the pool's peers would drop the routes (their path would hold its own AS): name the eBGP peers in bgp.peers, or use localPref"))
	}
	for _, agg := range []struct {
		name string
		n    int32
		is4  bool
	}{{"aggregationLength", pb.AggregationLength, true}, {"aggregationLengthV6", pb.AggregationLengthV6, false}} {
		errs = append(errs, validateAggregation(pool, path.Child(agg.name), agg.n, agg.is4)...)
	}
	return errs
}

// maxASPathPrepend bounds a pool's asPathPrepend: ten repeats already
// lose to any sane path, and routers cap AS paths (FRR's maxas-limit).
const maxASPathPrepend = 10

// validateAggregation refuses an aggregation length shorter than one of
// the pool's CIDRs of that family (after splitting ranges into CIDRs):
// the aggregate would cover addresses outside the pool.
func validateAggregation(pool *ServicePool, path *field.Path, n int32, is4 bool) field.ErrorList {
	if n == 0 {
		return nil
	}
	bits := int32(128)
	if is4 {
		bits = 32
	}
	if n < 1 || n > bits {
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be 1 to %d", bits))}
	}
	for _, a := range pool.Addresses {
		r, err := ParseAddressRange(a)
		if err != nil || r.Is4() != is4 {
			continue
		}
		for _, p := range r.Prefixes() {
			if int32(p.Bits()) > n {
				return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("the pool's %s holds %s, a /%d: a /%d around one of its addresses would cover addresses outside the pool; at least %d", a, p, p.Bits(), n, p.Bits()))}
			}
		}
	}
	return nil
}

// PeerSet is the peers of spec.bgp the pool's routes go to: those its
// peers name, or every one.
func (pb *PoolBGP) PeerSet(b *BGPSpec) []BGPPeer {
	if pb == nil || len(pb.Peers) == 0 {
		return b.Peers
	}
	var out []BGPPeer
	for _, p := range b.Peers {
		if slices.ContainsFunc(pb.Peers, p.Is) {
			out = append(out, p)
		}
	}
	return out
}

// SameAddress tells whether two written addresses are one valid address
// (2001:db8::1 and 2001:DB8:0::1 are).
func SameAddress(x, y string) bool {
	a, err1 := parseAddr(x)
	b, err2 := parseAddr(y)
	return err1 == nil && err2 == nil && a == b
}

func largeCommunityError(cm string) string {
	parts := strings.Split(cm, ":")
	ok := len(parts) == 3
	for _, part := range parts {
		if _, err := strconv.ParseUint(part, 10, 32); err != nil { // no sign, not empty
			ok = false
		}
	}
	if !ok {
		return "must be GLOBAL:LOCAL1:LOCAL2, each part 0-4294967295"
	}
	return ""
}

// poolFamiliesPeered refuses a pool whose bgp.peers leave a family of its
// addresses without a peer: those addresses would be announced nowhere.
func poolFamiliesPeered(pool *ServicePool, peers []BGPPeer, path *field.Path) field.ErrorList {
	peered := families(peers)
	for _, a := range pool.Addresses {
		if r, err := ParseAddressRange(a); err == nil && !peered[r.Is4()] {
			return field.ErrorList{field.Invalid(path, pool.BGP.Peers, fmt.Sprintf("no %s peer among them to announce the pool's %s to", familyName(r.First), a))}
		}
	}
	return nil
}

// maxGracefulRestartTime is the longest restart time the capability
// carries (12 bits, RFC 4724).
const maxGracefulRestartTime = 4095 * time.Second

// DefaultGracefulRestartTime is spec.bgp.gracefulRestartTime's default.
const DefaultGracefulRestartTime = 30 * time.Second

// RestartTime is spec.bgp.gracefulRestartTime in seconds, with its
// default.
func (b *BGPSpec) RestartTime() int {
	d, err := time.ParseDuration(b.GracefulRestartTime)
	if err != nil || d <= 0 {
		d = DefaultGracefulRestartTime
	}
	return int(d / time.Second)
}

// Unnumbered tells a peer named by the nodes' interface it is on.
func (p BGPPeer) Unnumbered() bool { return p.Interface != "" }

// Name is how FRR and the status name the peer: its address, or the
// interface of an unnumbered one.
func (p BGPPeer) Name() string {
	if p.Unnumbered() {
		return p.Interface
	}
	return p.Address
}

// Is tells whether a pool's bgp.peers entry names p: its address (in any
// spelling), or an unnumbered peer's interface.
func (p BGPPeer) Is(s string) bool {
	if p.Unnumbered() {
		return s == p.Interface
	}
	return SameAddress(p.Address, s)
}

// families are the address families peers carry: an address peer its
// own, an unnumbered or dualStack one both.
func families(peers []BGPPeer) map[bool]bool {
	out := map[bool]bool{}
	for _, p := range peers {
		if p.Unnumbered() || p.DualStack {
			out[true], out[false] = true, true
		} else if a, err := parseAddr(p.Address); err == nil {
			out[a.Is4()] = true
		}
	}
	return out
}

// validateUnnumbered checks a peer without an address: it must name its
// interface, and only that.
func validateUnnumbered(peer *BGPPeer, path *field.Path) field.ErrorList {
	switch {
	case peer.Interface == "":
		return field.ErrorList{field.Required(path.Child("address"), "the router's address, or its interface for an unnumbered session")}
	case peer.Address != "":
		return field.ErrorList{field.Invalid(path.Child("interface"), peer.Interface, "name the router by address or by interface, not both")}
	case InterfaceNameError(peer.Interface) != "":
		return field.ErrorList{field.Invalid(path.Child("interface"), peer.Interface, InterfaceNameError(peer.Interface))}
	case isAddr(peer.Interface):
		return field.ErrorList{field.Invalid(path.Child("interface"), peer.Interface, "an address, not an interface: name a numbered peer in address")}
	case peer.EBGPMultihop != 0:
		return field.ErrorList{field.Invalid(path.Child("ebgpMultihop"), peer.EBGPMultihop, "an unnumbered peer is on the link: ebgpMultihop is for a router hops away")}
	case peer.DualStack:
		return field.ErrorList{field.Invalid(path.Child("dualStack"), peer.DualStack, "an unnumbered session carries both families already")}
	}
	return nil
}

// sameLinkTwice refuses two unnumbered peers on one interface for the
// same nodes (equal nodeSelectors): one link has one router at its far
// end. Selectors that differ may still select one node, which then peers
// with the first (docs/bgp.md, "Unnumbered peers").
func sameLinkTwice(peers []BGPPeer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range peers {
		for j := range i {
			if q := peers[j]; p.Unnumbered() && q.Interface == p.Interface && maps.Equal(p.NodeSelector, q.NodeSelector) {
				errs = append(errs, field.Duplicate(path.Index(i).Child("interface"), p.Interface+" (also "+path.Index(j).Child("interface").String()+", for the same nodes)"))
				break
			}
		}
	}
	return errs
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// routedVIPs names the first of spec.api and spec.ingress[] that is
// routed, or "".
func (c *ClusterVIPs) routedVIPs() string {
	if c.Spec.API.Routed {
		return "spec.api.routed"
	}
	for i, in := range c.Spec.Ingress {
		if in.Routed {
			return fmt.Sprintf("spec.ingress[%d].routed", i)
		}
	}
	return ""
}

// validateRouted checks what a routed VIP (spec.api.routed, an
// IngressController's routed) needs besides spec.bgp: VRRP unicast
// (multicast adverts stay on their segment, and routed holders share
// none); for the API with a bootstrap host, a router for that host to
// announce it to (validateRoutedBootstrap).
func validateRouted(c *ClusterVIPs) field.ErrorList {
	var errs field.ErrorList
	if what := c.routedVIPs(); what != "" && c.Spec.VRRP.Mode != ModeUnicast {
		errs = append(errs, field.Invalid(field.NewPath("spec", "vrrp", "mode"), c.Spec.VRRP.Mode,
			what+" needs "+ModeUnicast+": its holder is elected across routers, where multicast adverts do not go"))
	}
	return append(errs, validateRoutedBootstrap(c)...)
}

// BootstrapLabels are the labels the bootstrap host is matched with
// against spec.bgp.peers' nodeSelectors: spec.bootstrap.labels, or a
// control-plane node's role labels.
func (b *BootstrapSpec) BootstrapLabels() map[string]string {
	if len(b.Labels) > 0 {
		return b.Labels
	}
	return map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": ""}
}

// validateRoutedBootstrap checks spec.bootstrap.labels: only for a routed
// API VIP, and then they must select a router the bootstrap host can
// peer with on its own, before the cluster exists: by address (its links
// are not the nodes'). A password's Secret is vipctl bootstrap's to be
// given (--bgp-secret): there is no cluster to read it from yet.
func validateRoutedBootstrap(c *ClusterVIPs) field.ErrorList {
	b := c.Spec.Bootstrap
	if b == nil || c.PoolsOnly() {
		return nil
	}
	path := field.NewPath("spec", "bootstrap", "labels")
	errs := validateLabels(b.Labels, path)
	if !c.Spec.API.Routed {
		if len(b.Labels) > 0 {
			errs = append(errs, field.Forbidden(path, "only with spec.api.routed: the labels choose the BGP peers the bootstrap host announces the API VIP to"))
		}
		return errs
	}
	if c.Spec.BGP == nil {
		return errs
	}
	labels, selected := b.BootstrapLabels(), 0
	which := ""
	if len(b.Labels) == 0 {
		which = "(unset: a control-plane node's role labels) "
	}
	for i, peer := range c.Spec.BGP.Peers {
		if !Matches(peer.NodeSelector, labels) {
			continue
		}
		selected++
		at := field.NewPath("spec", "bgp", "peers").Index(i)
		if peer.Interface != "" {
			errs = append(errs, field.Invalid(path, labels, fmt.Sprintf("%sselect %s, an unnumbered peer (interface %s): the bootstrap host peers by address only; give it labels this peer's nodeSelector does not match", which, at, peer.Interface)))
		}
	}
	if selected == 0 {
		errs = append(errs, field.Invalid(path, labels, which+"select no peer of spec.bgp.peers (by their nodeSelector): the bootstrap host would announce the routed API VIP to no router during the install"))
	}
	return errs
}

// Matches tells whether labels satisfy selector (every pair in it).
func Matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
