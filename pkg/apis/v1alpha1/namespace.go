package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NamespaceError says why ns cannot be the namespace of vipctl's objects
// in the cluster (the vipctl-config ConfigMap, the allocator's Lease), or
// "": Kubernetes names a namespace with a DNS-1123 label. Every command's
// --namespace is checked with it before the cluster is asked, so an empty
// or mistyped one is not reported as a missing ConfigMap.
func NamespaceError(ns string) string {
	if ns == "" {
		return "empty: the namespace of the vipctl-config ConfigMap"
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return "not a namespace name: " + strings.Join(msgs, "; ")
	}
	return ""
}
