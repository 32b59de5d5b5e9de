package v1alpha1

import (
	"fmt"
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
	b := c.Spec.BGP
	if b == nil {
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
		a, err := parseAddr(peer.Address)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("address"), peer.Address, err.Error()))
		default:
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
	errs = append(errs, familiesPeered(c, path.Child("peers"))...)
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
	peered := map[bool]bool{}
	for _, p := range c.Spec.BGP.Peers {
		if a, err := parseAddr(p.Address); err == nil {
			peered[a.Is4()] = true
		}
	}
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
