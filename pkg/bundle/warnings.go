package bundle

import (
	"fmt"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// manyPeers is the node count past which render warns about an
// IngressController without a nodeSelector.
const manyPeers = 100

// PeerWarnings are what `vipctl render --nodes` says about an input it
// renders all the same: an IngressController without a nodeSelector in a
// cluster of more than manyPeers nodes puts every node into its VRRP
// instance, so every node's keepalived.conf lists every other node as a
// peer (at 5000 nodes 666 MB of configs; docs/benchmarks/render.md,
// "Rendering 5000 nodes"). The sidecar narrows it once it sees the
// routers; render, and every node before that, cannot.
func PeerWarnings(c *v1alpha1.ClusterVIPs, nodes []cluster.Node) []string {
	if len(nodes) <= manyPeers {
		return nil
	}
	var out []string
	for i, in := range c.Spec.Ingress {
		if len(in.NodeSelector) > 0 {
			continue
		}
		out = append(out, fmt.Sprintf("spec.ingress[%d].nodeSelector is not set: every one of the %d nodes takes part in IngressController %s's VRRP instance and lists all the others as peers; copy the IngressController's spec.nodePlacement.nodeSelector.matchLabels there", i, len(nodes), in.Name))
	}
	return out
}
