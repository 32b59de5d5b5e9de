package cluster

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NodeNameError says why name cannot be a Node's name, or "": Kubernetes
// takes a DNS-1123 subdomain. A name given to vipctl (a node list, vipctl
// drain NODE) becomes a haproxy server line, a directory of render's
// output and a request path: a newline or a slash must never get there.
func NodeNameError(name string) string {
	if name == "" {
		return "empty: the Node's name"
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "not a Node name: " + strings.Join(msgs, "; ")
	}
	return ""
}
