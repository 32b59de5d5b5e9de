package nodelist

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
)

// FuzzNodeList: any bytes given as --nodes. No input may panic; a list
// the checks accept is one the reader takes whole, whose names are each
// one safe path element and no line break, with no address on two nodes;
// and where the example's plan takes it, every node's files render. The
// seeds are the example node lists and testdata/bad-input/nodes-*.yaml.
func FuzzNodeList(f *testing.F) {
	seeds, _ := filepath.Glob(fixture.Repo("examples/nodes/*.yaml"))
	bad, _ := filepath.Glob(fixture.Repo("testdata/bad-input/nodes-*.yaml"))
	for _, p := range append(seeds, bad...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	c := fixture.Example(f, "compact-ipv4.yaml")
	ids, err := vrid.ForCluster(c)
	if err != nil {
		f.Fatal(err)
	}
	in := Input{Path: "nodes.yaml", Config: c, ConfigPath: "compact-ipv4.yaml", Interface: "br-ex"}
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := cluster.DecodeNodeList("nodes.yaml", data)
		if err != nil || len(in.Validate(items)) > 0 {
			return
		}
		list, err := cluster.NodeListFromObjects("nodes.yaml", items, "br-ex")
		if err != nil {
			t.Fatalf("the checks accepted a list the reader refuses: %v", err)
		}
		owner := map[netip.Addr]string{}
		for _, n := range list.Nodes {
			if filepath.Base(n.Name) != n.Name || strings.ContainsAny(n.Name, "\n\r /") || n.Name == ".." {
				t.Fatalf("accepted node name %q is no single path element", n.Name)
			}
			for _, a := range n.Addresses {
				if o, dup := owner[a]; dup && o != n.Name {
					t.Fatalf("accepted nodes %s and %s share %s", o, n.Name, a)
				}
				owner[a] = n.Name
			}
		}
		if len(v1alpha1.ValidateNodes(c, cluster.Addresses(list.Nodes))) > 0 {
			return
		}
		plan, err := bundle.NodePlan(c, ids, cluster.State{Nodes: list.Nodes})
		if err != nil {
			return
		}
		for _, n := range list.Nodes {
			if _, err := plan.NodeFiles(n.Name); err != nil {
				t.Fatalf("accepted list, planned, renders no files for %s: %v", n.Name, err)
			}
		}
	})
}
