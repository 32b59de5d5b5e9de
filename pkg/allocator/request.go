package allocator

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// request turns a Service into an allocation request.
func request(s *corev1.Service) Request {
	r := Request{Key: s.Namespace + "/" + s.Name, Namespace: s.Namespace, Labels: s.Labels,
		Pool: s.Annotations[v1alpha1.AnnotationPool], SharingKey: s.Annotations[v1alpha1.AnnotationAllowSharedIP], Backend: BackendKey(s)}
	for _, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = "TCP"
		}
		r.Ports = append(r.Ports, Port{Protocol: proto, Port: p.Port})
	}
	var asked []string
	if v := s.Annotations[v1alpha1.AnnotationLoadBalancerIPs]; v != "" {
		asked = strings.Split(v, ",")
	} else if s.Spec.LoadBalancerIP != "" { //nolint:staticcheck // still the most used way to ask for an address
		asked = []string{s.Spec.LoadBalancerIP} //nolint:staticcheck
	}
	for _, a := range asked {
		if ip, err := netip.ParseAddr(strings.TrimSpace(a)); err == nil {
			r.Requested = append(r.Requested, ip.Unmap())
		} else {
			r.Requested = append(r.Requested, netip.Addr{})
		}
	}
	for _, f := range s.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			r.Families = append(r.Families, IPv6)
		} else {
			r.Families = append(r.Families, IPv4)
		}
	}
	if len(r.Families) == 0 {
		r.Families = []Family{IPv4}
	}
	policy := corev1.IPFamilyPolicySingleStack
	if s.Spec.IPFamilyPolicy != nil {
		policy = *s.Spec.IPFamilyPolicy
	}
	switch policy {
	case corev1.IPFamilyPolicySingleStack:
		r.Families, r.Required = r.Families[:1], true
	case corev1.IPFamilyPolicyRequireDualStack:
		r.Required = true
	default:
		if len(r.Families) == 1 {
			// The apiserver fills both families for PreferDualStack only
			// when the cluster is dual-stack; ask for the other anyway.
			other := IPv6
			if r.Families[0] == IPv6 {
				other = IPv4
			}
			r.Families = append(r.Families, other)
		}
	}
	return r
}

func statusAddrs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
