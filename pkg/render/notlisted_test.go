package render

import (
	"testing"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestNodeNotListedNamesTheLikelyName: a node name that the plan lacks
// while it has the same host under a short name (the Node's name against
// NODE_NAME, an FQDN against a short name) is named in the error.
func TestNodeNotListedNamesTheLikelyName(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "compact-ipv4.yaml")
	nodes, err := cluster.LoadNodeList(fixture.Repo("examples/nodes/compact.yaml"), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(cluster.Compile(c), testIDs(c), cluster.State{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{
		"master-1.ostest.example.test": "node master-1.ostest.example.test is not in the node list, which lists master-1: if that is this node, list it by its Node name master-1.ostest.example.test, as `oc get nodes` shows it (vipctl nodes --from-cluster writes the list with those names)",
		"master-7":                     "node master-7 is not in the node list (master-0, master-1, master-2): a node added after the list was written, or one listed under another name",
	} {
		if _, err := p.NodeFiles(node); err == nil || err.Error() != want {
			t.Errorf("NodeFiles(%s):\ngot  %v\nwant %s", node, err, want)
		}
		if _, err := p.Handover(node); err == nil || err.Error() != want {
			t.Errorf("Handover(%s):\ngot  %v\nwant %s", node, err, want)
		}
	}
}
