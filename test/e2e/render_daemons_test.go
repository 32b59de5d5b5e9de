package e2e

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/netlab"
)

// nodeListFor names the node list each example renders with.
func nodeListFor(example string) string {
	if strings.Contains(example, "node-groups") {
		return "../../examples/nodes/groups.yaml"
	}
	if strings.Contains(example, "bgp-two-racks") {
		return "../../examples/nodes/racks.yaml"
	}
	if strings.Contains(example, "own-interface") {
		return "../../examples/nodes/dmz.yaml"
	}
	return "../../examples/nodes/compact.yaml"
}

// firstAddresses allocates the first few addresses of every pool block, as
// the IPAM would for the first Services, so pool instances render too.
func firstAddresses(t *testing.T, c *v1alpha1.ClusterVIPs, n int) map[string][]netip.Addr {
	t.Helper()
	out := map[string][]netip.Addr{}
	for _, p := range c.Spec.ServicePools {
		for _, a := range p.Addresses {
			r, err := v1alpha1.ParseAddressRange(a)
			if err != nil {
				t.Fatal(err)
			}
			for i, addr := 0, r.First; i < n && r.Contains(addr); i, addr = i+1, addr.Next() {
				out[p.Name] = append(out[p.Name], addr)
			}
		}
	}
	return out
}

// TestRenderedConfigsPassRealDaemons renders every example for its node
// list and has the real keepalived (inside a namespace with the br-ex
// interface) and haproxy judge every node's files, scripts included.
func TestRenderedConfigsPassRealDaemons(t *testing.T) {
	lab := netlab.New(t)
	judge := lab.AddHost("judge", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.250/24", "203.0.113.250/24", "2001:db8:100::250/64"}})
	// The DMZ interface of examples/own-interface.yaml: keepalived
	// refuses a VIP on an interface that does not exist.
	judge.MustExec("ip", "link", "add", "br-dmz", "type", "bridge")
	judge.MustExec("ip", "link", "set", "br-dmz", "up")
	ctx := context.Background()
	examples, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := 0
	for _, ex := range examples {
		c, err := v1alpha1.Load(ex)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := cluster.LoadNodeList(nodeListFor(ex), c.Spec.VRRP.Interface)
		if err != nil {
			t.Fatal(err)
		}
		files, err := bundle.Build(c, bundle.Options{Nodes: nodes, State: cluster.State{ServiceVIPs: firstAddresses(t, c, 4)}})
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		out := t.TempDir()
		if err := os.Chmod(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := bundle.WriteDir(filepath.Join(out, "r"), files); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			root := filepath.Join(out, "r", "nodes", n.Name)
			kconf, err := os.ReadFile(filepath.Join(root, onnode.KeepalivedConfPath))
			if err != nil {
				t.Fatal(err)
			}
			if err := keepalived.Check(ctx, kconf, configcheck.Options{Netns: judge.NS, Root: root}); err != nil {
				t.Errorf("%s node %s: %v", filepath.Base(ex), n.Name, err)
			}
			checked++
			if fconf, err := os.ReadFile(filepath.Join(root, onnode.FRRConfPath)); err == nil {
				if err := frr.Check(ctx, fconf, configcheck.Options{}); err != nil {
					t.Errorf("%s node %s: %v", filepath.Base(ex), n.Name, err)
				}
				checked++
			}
			if !n.ControlPlane || c.PoolsOnly() { // no haproxy of vipctl's then
				continue
			}
			hconf, err := os.ReadFile(filepath.Join(root, onnode.HaproxyConfPath))
			if err != nil {
				t.Fatal(err)
			}
			if err := haproxy.Check(ctx, hconf, configcheck.Options{}); err != nil {
				t.Errorf("%s node %s: %v", filepath.Base(ex), n.Name, err)
			}
			checked++
		}
	}
	t.Logf("%d rendered configs judged by the real daemons", checked)
}

// TestBootstrapHostConfigsPassRealDaemons: what `vipctl bootstrap` runs
// for every example that names a bootstrap host (its keepalived.conf and
// haproxy.cfg, from the nodes' plan) passes the real daemons' checks too.
func TestBootstrapHostConfigsPassRealDaemons(t *testing.T) {
	lab := netlab.New(t)
	judge := lab.AddHost("judge", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.250/24", "2001:db8:100::250/64"}})
	ctx := context.Background()
	examples, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, ex := range examples {
		c, err := v1alpha1.Load(ex)
		if err != nil {
			t.Fatal(err)
		}
		if c.Spec.Bootstrap == nil {
			continue
		}
		nodes, err := cluster.LoadNodeList(nodeListFor(ex), c.Spec.VRRP.Interface)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := vrid.ForCluster(c)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := render.NewPlan(cluster.Compile(c), ids, cluster.State{Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		files, err := plan.NodeFiles(render.BootstrapNode)
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		root := t.TempDir()
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(root, f.Path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			switch f.Path {
			case onnode.KeepalivedConfPath:
				err = keepalived.Check(ctx, f.Data, configcheck.Options{Netns: judge.NS, Root: root})
			case onnode.HaproxyConfPath:
				err = haproxy.Check(ctx, f.Data, configcheck.Options{})
			default:
				continue
			}
			if err != nil {
				t.Errorf("%s, the bootstrap host's %s: %v", filepath.Base(ex), f.Path, err)
			}
			checked++
		}
	}
	if checked < 2 {
		t.Fatalf("%d bootstrap host configs judged; examples/day1-bootstrap.yaml has two", checked)
	}
}
