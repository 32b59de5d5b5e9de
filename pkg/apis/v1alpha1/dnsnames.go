package v1alpha1

// The DNS names the VIPs are reached by (docs/dns.md): api and api-int
// under the cluster's domain, a wildcard under each IngressController's.
// A name the DNS cannot hold would be rendered into every record form and
// `vipctl dns check` would then blame the server.

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RFC 1035: a label holds at most 63 octets, a name at most 253
// characters as written (255 octets on the wire).
const (
	maxDNSLabel = validation.DNS1123LabelMaxLength
	maxDNSName  = validation.DNS1123SubdomainMaxLength
)

// longestAPIName is the longest name OpenShift gives the API under the
// cluster's domain.
const longestAPIName = "api-int"

// dnsNames checks that every name the records get fits the DNS, and that
// no two IngressControllers serve one domain (two wildcard records for
// one name, each pointing at another VIP). Run after the fields' own
// checks: a domain that is no DNS-1123 subdomain is reported there.
func (v *validator) dnsNames(c *ClusterVIPs, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := &c.Spec
	base := spec.Child("baseDomain")
	baseOK := len(validation.IsDNS1123Subdomain(s.BaseDomain)) == 0
	if baseOK {
		if msg := longLabel(s.BaseDomain); msg != "" {
			errs = append(errs, field.Invalid(base, s.BaseDomain, msg))
			baseOK = false
		}
	}
	if baseOK && len(validation.IsDNS1123Label(c.Metadata.Name)) == 0 {
		if name := longestAPIName + "." + c.ClusterDomain(); len(name) > maxDNSName {
			errs = append(errs, field.Invalid(base, s.BaseDomain, fmt.Sprintf("%s.%s.<baseDomain> would be %d characters; a DNS name holds at most %d", longestAPIName, c.Metadata.Name, len(name), maxDNSName)))
		}
	}
	domains := map[string]int{}
	for i, in := range s.Ingress {
		p := spec.Child("ingress").Index(i).Child("domain")
		if in.Domain == "" || len(validation.IsDNS1123Subdomain(in.Domain)) > 0 {
			continue
		}
		switch msg := longLabel(in.Domain); {
		case v.derivedDomain(&in):
			// Fits whenever api-int's name does, which is checked above.
		case msg != "":
			errs = append(errs, field.Invalid(p, in.Domain, msg))
		case len("*."+in.Domain) > maxDNSName:
			errs = append(errs, field.Invalid(p, in.Domain, fmt.Sprintf("its wildcard *.<domain> would be %d characters; a DNS name holds at most %d", len("*."+in.Domain), maxDNSName)))
		}
		if prev, dup := domains[in.Domain]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (also %s): one domain, one IngressController, one wildcard record", in.Domain, spec.Child("ingress").Index(prev).Child("domain"))))
			continue
		}
		domains[in.Domain] = i
	}
	return errs
}

// longLabel says which label of name is too long for the DNS, or "".
func longLabel(name string) string {
	for _, l := range strings.Split(name, ".") {
		if len(l) > maxDNSLabel {
			return fmt.Sprintf("the label %s... is %d characters; a DNS label holds at most %d", l[:16], len(l), maxDNSLabel)
		}
	}
	return ""
}
