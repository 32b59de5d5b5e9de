package render

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/netlab"
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
	judge := daemonJudge(f)
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
		p, err := NewPlan(cluster.Compile(c), ids, cluster.State{Nodes: nodes}, WithLonelySkipped())
		if err != nil {
			t.Fatalf("accepted config has no plan: %v", err)
		}
		for _, n := range nodes {
			files, err := p.NodeFiles(n.Name)
			if err != nil || len(files) == 0 || len(files[0].Data) == 0 {
				t.Fatalf("accepted config renders no files for %s: %v", n.Name, err)
			}
			if judge != nil && c.Spec.VRRP.Interface == "br-ex" {
				judge(t, files)
			}
		}
	})
}

// daemonJudge returns, when VIPCTL_FUZZ_DAEMONS is set (`make fuzz`),
// a check that has the real keepalived and haproxy judge a sample of the
// rendered files inside a namespace with br-ex: the short run in `make
// test` stays in-process. Each fuzz worker builds its own namespace.
func daemonJudge(f *testing.F) func(*testing.T, []onnode.File) {
	if os.Getenv("VIPCTL_FUZZ_DAEMONS") == "" {
		return nil
	}
	h := netlab.New(f).AddHost("judge", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.250/24", "2001:db8:100::250/64"}})
	root, err := os.MkdirTemp("", "vipctl-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(root) })
	// keepalived's script security wants every directory above a script
	// closed to group and others' writes, and the scripts reachable.
	if err := os.Chmod(root, 0o755); err != nil {
		f.Fatal(err)
	}
	scripts := ScriptFiles()
	for _, sc := range scripts {
		path := filepath.Join(root, sc.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(path, sc.Data, sc.Mode); err != nil {
			f.Fatal(err)
		}
	}
	var n atomic.Int64
	return func(t *testing.T, files []onnode.File) {
		// Every seed, then one render in 50: a config test costs
		// milliseconds, a render microseconds.
		if n.Add(1) > 20 && n.Load()%50 != 0 {
			return
		}
		for _, fl := range files {
			var err error
			switch fl.Path {
			case onnode.KeepalivedConfPath:
				err = keepalived.Check(context.Background(), fl.Data, configcheck.Options{Netns: h.NS, Root: root})
			case onnode.HaproxyConfPath:
				err = haproxy.Check(context.Background(), fl.Data, configcheck.Options{})
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", fl.Path, err, fl.Data)
			}
		}
	}
}
