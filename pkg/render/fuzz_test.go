package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// FuzzParseRender: decode, default, validate, assign IDs and render every
// node of a fixed node list. No input may panic, and every input that
// validate and render --nodes accept must render each node's files: an
// accepted config that cannot render is a config every node would keep
// refusing. The seeds are the examples (f.Add) plus testdata/fuzz.
func FuzzParseRender(f *testing.F) {
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	bad, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "bad-input", "*.yaml"))
	for _, p := range append(examples, bad...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join("..", "..", "examples", "nodes", "compact.yaml"), "br-ex")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := v1alpha1.Parse(data)
		if err != nil {
			return
		}
		if errs := v1alpha1.ValidateNodes(c, cluster.Addresses(nodes)); len(errs) > 0 {
			return
		}
		// validate and render both refuse a config whose IDs cannot be
		// assigned (OpenShift's API ID avoided without a pin, say).
		ids, err := vrid.ForCluster(c)
		if err != nil {
			return
		}
		p, err := NewPlan(c, ids, cluster.State{Nodes: nodes}, WithLonelySkipped())
		if err != nil {
			t.Fatalf("accepted config has no plan: %v", err)
		}
		for _, n := range nodes {
			files, err := p.NodeFiles(n.Name)
			if err != nil || len(files) == 0 || len(files[0].Data) == 0 {
				t.Fatalf("accepted config renders no files for %s: %v", n.Name, err)
			}
		}
	})
}
