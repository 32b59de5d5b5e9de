package bundle

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestPeerWarnings: render warns about an IngressController without a
// nodeSelector only where that makes every keepalived.conf long (more
// than manyPeers nodes), once per such controller.
func TestPeerWarnings(t *testing.T) {
	t.Parallel()
	nodes := func(n int) []cluster.Node {
		out := make([]cluster.Node, n)
		for i := range out {
			out[i].Name = fmt.Sprintf("node-%d", i)
		}
		return out
	}
	infra := map[string]string{"node-role.kubernetes.io/infra": ""}
	for _, tc := range []struct {
		name    string
		ingress []v1alpha1.IngressSpec
		nodes   int
		want    []string
	}{
		{name: "a small cluster", ingress: []v1alpha1.IngressSpec{{Name: "default"}}, nodes: manyPeers},
		{name: "a large cluster, a selector", ingress: []v1alpha1.IngressSpec{{Name: "default", NodeSelector: infra}}, nodes: 5000},
		{name: "a large cluster, no selector", ingress: []v1alpha1.IngressSpec{{Name: "default"}}, nodes: manyPeers + 1,
			want: []string{"spec.ingress[0].nodeSelector is not set: every one of the 101 nodes takes part in IngressController default's VRRP instance and lists all the others as peers; copy the IngressController's spec.nodePlacement.nodeSelector.matchLabels there"}},
		{name: "one shard of two without", ingress: []v1alpha1.IngressSpec{{Name: "default", NodeSelector: infra}, {Name: "internal"}}, nodes: 5000,
			want: []string{"spec.ingress[1].nodeSelector is not set: every one of the 5000 nodes takes part in IngressController internal's VRRP instance and lists all the others as peers; copy the IngressController's spec.nodePlacement.nodeSelector.matchLabels there"}},
		{name: "no IngressController (pools only)", nodes: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &v1alpha1.ClusterVIPs{}
			c.Spec.Ingress = tc.ingress
			if got := PeerWarnings(c, nodes(tc.nodes)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q,\nwant %q", got, tc.want)
			}
		})
	}
}
