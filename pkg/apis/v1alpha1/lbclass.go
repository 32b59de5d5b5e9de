package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// LoadBalancerClassSpec names the load-balancer class vipctl serves and
// whether it serves Services without a class too.
type LoadBalancerClassSpec struct {
	// Name is the class a Service names in spec.loadBalancerClass to be
	// served by vipctl (Kubernetes makes that field immutable once set).
	// A qualified name, as Kubernetes wants it there. Default
	// vipctl.io/keepalived.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	Name string `json:"name,omitempty"`
	// Only leaves the Services without a class to another
	// implementation of the cluster's default class (MetalLB started
	// without --lb-class, say): vipctl allocates, announces and writes
	// the status of only the Services that name Name. Default false:
	// vipctl serves the Services without a class as well, and must then
	// be the cluster's only default implementation.
	Only bool `json:"only,omitempty"`
}

// ServedClass is the class vipctl serves: spec.loadBalancerClass.name,
// LoadBalancerClass when unset.
func (s *ClusterVIPsSpec) ServedClass() string {
	if s.LoadBalancerClass == nil || s.LoadBalancerClass.Name == "" {
		return LoadBalancerClass
	}
	return s.LoadBalancerClass.Name
}

// ClassOnly tells whether vipctl leaves Services without a class alone
// (spec.loadBalancerClass.only).
func (s *ClusterVIPsSpec) ClassOnly() bool {
	return s.LoadBalancerClass != nil && s.LoadBalancerClass.Only
}

// validateLoadBalancerClass checks spec.loadBalancerClass.name by the rule
// Kubernetes applies to a Service's spec.loadBalancerClass: a class no
// Service can name would leave every Service unserved (with only) or
// serve none of its own.
func validateLoadBalancerClass(c *LoadBalancerClassSpec, path *field.Path) field.ErrorList {
	if c == nil || c.Name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, m := range validation.IsQualifiedName(c.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), c.Name, m+" (the rule of a Service's spec.loadBalancerClass)"))
	}
	return errs
}
