package bundle_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestNodeFilesAtNodePaths: with --nodes, DIR/nodes/<node>/ holds each
// file where it lies on the node, FRR's config included: the pods see it
// as /etc/frr/frr.conf, but the node keeps it in /var/lib/vipctl/frr (on
// main it was written as nodes/<node>/etc/frr/frr.conf, a path the node
// never has).
func TestNodeFilesAtNodePaths(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", "bgp-two-racks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "racks.yaml"), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.Build(c, bundle.Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	n := nodes[0].Name
	for _, want := range []string{
		"nodes/" + n + "/etc/vipctl-keepalived/keepalived.conf",
		"nodes/" + n + "/var/lib/vipctl/frr/frr.conf",
		"nodes/" + n + "/etc/vipctl/scripts/check-http.sh",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("no %s among %v", want, paths)
		}
	}
	if slices.Contains(paths, "nodes/"+n+"/etc/frr/frr.conf") {
		t.Errorf("frr.conf written at the pods' path /etc/frr/frr.conf")
	}
}
