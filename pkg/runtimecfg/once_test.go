package runtimecfg

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestOnceWithoutBootstrapNodes: rendered without --nodes, the init
// container still lets keepalived start (a config without instances, which
// the real keepalived accepts) and says why.
func TestOnceWithoutBootstrapNodes(t *testing.T) {
	target := host.Target{Root: nodeRoot(t)}
	_, err := Once(t.Context(), OnceOptions{Target: target, Config: "../../examples/compact-ipv4.yaml",
		BootstrapNodes: filepath.Join(t.TempDir(), "missing.yaml"), NodeName: "master-0"})
	if !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("err = %v, want ErrNoBootstrapNodes", err)
	}
	data, err := os.ReadFile(target.Path(onnode.KeepalivedConfPath))
	if err != nil || !strings.Contains(string(data), "router_id master_0") || strings.Contains(string(data), "vrrp_instance") {
		t.Fatalf("placeholder keepalived.conf: %v\n%s", err, data)
	}
	if drain, _ := os.ReadFile(target.Path(onnode.DrainFile)); string(drain) != "0\n" {
		t.Errorf("drain file %q", drain)
	}
}

// TestOnceNodeNotListed: a node added after render is in neither the
// bootstrap list nor a last-good view. The init container must not fail
// (the pod would crash-loop for ever): keepalived starts without instances,
// taking no VIP from anyone, and the error says why.
func TestOnceNodeNotListed(t *testing.T) {
	target := host.Target{Root: nodeRoot(t)}
	_, err := Once(t.Context(), OnceOptions{Target: target, Config: "../../examples/compact-ipv4.yaml",
		BootstrapNodes: "../../examples/nodes/compact.yaml", NodeName: "worker-7"})
	if !errors.Is(err, ErrNoInstances) || !errors.Is(err, ErrNodeNotListed) {
		t.Fatalf("err = %v, want ErrNoInstances and ErrNodeNotListed", err)
	}
	data, err := os.ReadFile(target.Path(onnode.KeepalivedConfPath))
	if err != nil || !strings.Contains(string(data), "router_id worker_7") || strings.Contains(string(data), "vrrp_instance") {
		t.Fatalf("placeholder keepalived.conf: %v\n%s", err, data)
	}
}

// TestOnceNodeListedUnderAnotherName: the list names master-0 while the
// Node (the kubelet's hostname) is master-0.ocp4.example.com, the usual
// slip when a list is written from an installer's host names. The message
// must point at that, not only at a node added after render.
func TestOnceNodeListedUnderAnotherName(t *testing.T) {
	const list = "../../examples/nodes/compact.yaml"
	for _, tc := range []struct{ node, want string }{
		{"master-0.ocp4.example.com", "started without VRRP instances: node not in the node list: node master-0.ocp4.example.com is not in " + list +
			", which lists master-0: if that is this node, list it by its Node name master-0.ocp4.example.com, as `oc get nodes` shows it" +
			" (vipctl nodes --from-cluster writes the list with those names); its sidecar renders it from the API, and keeps a last-good view from then on"},
		{"master-3", "started without VRRP instances: node not in the node list: node master-3 is not in " + list +
			" (master-0, master-1, master-2): a node added after the list was written, or one listed under another name;" +
			" its sidecar renders it from the API, and keeps a last-good view from then on"},
	} {
		_, err := Once(t.Context(), OnceOptions{Target: host.Target{Root: nodeRoot(t)}, Config: "../../examples/compact-ipv4.yaml",
			BootstrapNodes: list, NodeName: tc.node})
		if !errors.Is(err, ErrNodeNotListed) || err.Error() != tc.want {
			t.Errorf("%s:\ngot  %v\nwant %s", tc.node, err, tc.want)
		}
	}
}

// TestBootInputSources: --once starts from the newer of the bootstrap
// node list and the last-good view, and takes the Service addresses,
// routers and day-2 pools only the last-good view knows either way.
func TestBootInputSources(t *testing.T) {
	static, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := filepath.Join(t.TempDir(), "nodes.yaml")
	data, err := os.ReadFile("../../examples/nodes/compact.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bootstrap, data, 0o644); err != nil {
		t.Fatal(err)
	}
	listed, err := cluster.LoadNodeList(bootstrap, static.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster as a sidecar saw it later: a fourth node, a Service
	// address, a second day-2 pool, routers placed.
	seen := cluster.State{
		Nodes:       append(append([]cluster.Node{}, listed...), cluster.Node{Name: "worker-3", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.23")}}),
		ServiceVIPs: map[string][]netip.Addr{"general": {netip.MustParseAddr("198.51.100.130")}},
		RouterNodes: map[string][]string{"default": {"master-0", "master-1"}},
		APIServers:  []netip.Addr{netip.MustParseAddr("198.51.100.11")},
	}
	live := *static
	live.Spec.ServicePools = append(append([]v1alpha1.ServicePool{}, static.Spec.ServicePools...), v1alpha1.ServicePool{Name: "extra", Addresses: []string{"198.51.100.200-198.51.100.210"}})
	v1alpha1.SetDefaults(&live)

	for _, tc := range []struct {
		name string
		// bootstrapNewer sets the list's mtime after the view's.
		bootstrapNewer bool
		// writtenBy names the node that wrote the view; "" writes none.
		writtenBy   string
		node        string
		wantFrom    string
		wantNodes   int
		wantVIPs    bool
		wantWarning string
		wantErr     error
	}{
		{name: "last-good newer", writtenBy: "master-0", node: "master-0", wantFrom: onnode.LastGoodPath, wantNodes: 4, wantVIPs: true},
		{name: "node added after render", writtenBy: "worker-3", node: "worker-3", wantFrom: onnode.LastGoodPath, wantNodes: 4, wantVIPs: true},
		// The list names the control plane only: the view's worker stays.
		{name: "bootstrap newer", bootstrapNewer: true, writtenBy: "master-0", node: "master-0", wantFrom: bootstrap, wantNodes: 4, wantVIPs: true},
		{name: "another node's view", writtenBy: "master-1", node: "master-0", wantFrom: bootstrap, wantNodes: 3,
			wantWarning: "written by node master-1, not master-0"},
		{name: "added node, no view yet", node: "worker-3", wantFrom: bootstrap, wantNodes: 3, wantErr: ErrNodeNotListed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := host.Target{Root: t.TempDir()}
			viewTime := time.Now().Add(-time.Hour)
			listTime := viewTime.Add(-time.Minute)
			if tc.bootstrapNewer {
				listTime = viewTime.Add(time.Minute)
			}
			if tc.writtenBy != "" {
				if _, err := SaveLastGood(target, tc.writtenBy, &live, seen); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(target.Path(onnode.LastGoodPath), viewTime, viewTime); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chtimes(bootstrap, listTime, listTime); err != nil {
				t.Fatal(err)
			}
			in, err := BootInput(OnceOptions{Target: target, BootstrapNodes: bootstrap, NodeName: tc.node}, static)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if in.From != tc.wantFrom || len(in.State.Nodes) != tc.wantNodes {
				t.Errorf("from %s with %d nodes, want %s with %d", in.From, len(in.State.Nodes), tc.wantFrom, tc.wantNodes)
			}
			if got := len(in.State.ServiceVIPs["general"]) == 1 && len(in.Model.Config.Spec.ServicePools) == 2 && len(in.State.RouterNodes["default"]) == 2; got != tc.wantVIPs {
				t.Errorf("Service addresses, day-2 pools and routers from the view: %v, want %v (%+v)", got, tc.wantVIPs, in.State)
			}
			if in.State.APIServers != nil {
				t.Errorf("APIServers %v carried over: a cold start must balance over every control-plane node", in.State.APIServers)
			}
			if warned := strings.Join(in.Warnings, "\n"); !strings.Contains(warned, tc.wantWarning) || (tc.wantWarning == "" && warned != "") {
				t.Errorf("warnings %q, want %q", warned, tc.wantWarning)
			}
			if in.Model.Config.Spec.API.VIPs[0] != static.Spec.API.VIPs[0] {
				t.Errorf("static parts must come from the file")
			}
		})
	}
}

// TestSaveLastGoodOnlyOnChange: a resync that changes nothing leaves the
// file (and its time, which BootInput compares) alone.
func TestSaveLastGoodOnlyOnChange(t *testing.T) {
	c, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	target := host.Target{Root: t.TempDir()}
	st := cluster.State{Nodes: []cluster.Node{{Name: "a", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}}}}
	for i, want := range []bool{true, false} {
		if changed, err := SaveLastGood(target, "a", c, st); err != nil || changed != want {
			t.Fatalf("save %d: changed %v, %v; want %v", i, changed, err, want)
		}
	}
	st.ServiceVIPs = map[string][]netip.Addr{"general": {netip.MustParseAddr("198.51.100.130")}}
	if changed, err := SaveLastGood(target, "a", c, st); err != nil || !changed {
		t.Fatalf("a new Service address: changed %v, %v", changed, err)
	}
	lg, got, _, err := LoadLastGood(target)
	if err != nil || lg.Node != "a" || got.Metadata.Name != c.Metadata.Name || lg.State.ServiceVIPs["general"][0] != netip.MustParseAddr("198.51.100.130") {
		t.Fatalf("read back %+v %v", lg, err)
	}
}

// TestBootInputHoldsBackUntilSynced: --once renders the node held back
// (lowest priority) unless the keepalived pod's sidecar has synced since
// the pod started; a new keepalived pod's init container forgets that
// sync, the haproxy pod's (KeepDrain) does not.
func TestBootInputHoldsBackUntilSynced(t *testing.T) {
	static, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	target := host.Target{Root: t.TempDir()}
	o := OnceOptions{Target: target, BootstrapNodes: "../../examples/nodes/compact.yaml", NodeName: "master-0"}
	if in, err := BootInput(o, static); err != nil || !in.HoldBack {
		t.Fatalf("never synced: HoldBack %v, %v; want true", in.HoldBack, err)
	}
	if err := os.MkdirAll(target.Path(onnode.RunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := target.WriteFlag(onnode.SyncedFile, true); err != nil {
		t.Fatal(err)
	}
	if in, err := BootInput(o, static); err != nil || in.HoldBack {
		t.Fatalf("synced: HoldBack %v, %v; want false", in.HoldBack, err)
	}
}

// TestOnceEndsADrainUnlessKept: the keepalived pod's --once ends a drain
// its predecessor's preStop began (routes gone, drain file 0); the haproxy
// pod's (--keep-drain) leaves it running. Without a bootstrap node list
// Once writes a placeholder keepalived.conf, judged by the real keepalived.
func TestOnceEndsADrainUnlessKept(t *testing.T) {
	lab := netlab.New(t)
	n := lab.AddHost("n", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24"}})
	tn := host.Target{Root: nodeRoot(t), Netns: n.NS}
	if err := os.MkdirAll(tn.Path(onnode.RunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	n.MustExec("ip", "addr", "add", "198.51.100.5/32", "dev", "br-ex")
	h := onnode.Handover{Interface: "br-ex", Instances: []onnode.HandoverInstance{
		{Family: 4, VRID: 1, VIPs: fixture.Addrs("198.51.100.5"), Peers: fixture.Addrs("198.51.100.12")},
	}}
	if err := dataplane.Drain(tn, h); err != nil {
		t.Fatal(err)
	}
	routes := func() string {
		return strings.TrimSpace(string(n.MustExec("ip", "route", "show", "table", "local", "proto", "118")))
	}
	o := OnceOptions{Target: tn, Config: "../../examples/compact-ipv4.yaml", BootstrapNodes: filepath.Join(t.TempDir(), "none.yaml"), NodeName: "master-0", KeepDrain: true}
	if _, err := Once(context.Background(), o); !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("Once without a node list: %v, want %v", err, ErrNoBootstrapNodes)
	}
	if got := runFile(t, tn, onnode.DrainFile); got != "1" {
		t.Errorf("drain file %q after Once with KeepDrain, want 1", got)
	}
	if got := routes(); got == "" {
		t.Error("Once with KeepDrain removed the drained node's local routes")
	}
	o.KeepDrain = false
	if _, err := Once(context.Background(), o); !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("Once without a node list: %v, want %v", err, ErrNoBootstrapNodes)
	}
	if got := runFile(t, tn, onnode.DrainFile); got != "0" {
		t.Errorf("drain file %q after Once, want 0", got)
	}
	if got := routes(); got != "" {
		t.Errorf("local routes %q after Once, want none", got)
	}
}

// runFile is a run file's content, trimmed.
func runFile(t *testing.T, tg host.Target, p string) string {
	t.Helper()
	data, err := os.ReadFile(tg.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
