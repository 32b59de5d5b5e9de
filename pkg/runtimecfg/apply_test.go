package runtimecfg

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/netlab"
)

func loadExample(t *testing.T) (*v1alpha1.ClusterVIPs, cluster.State) {
	t.Helper()
	c, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList("../../examples/nodes/compact.yaml", "br-ex")
	if err != nil {
		t.Fatal(err)
	}
	return c, cluster.State{Nodes: nodes}
}

// nodeRoot is a world-traversable root, as keepalived's script security
// requires of the directories above its scripts.
func nodeRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "vipctl-runtimecfg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestApplyKeepsLastGood: a change the real keepalived rejects is never
// written, the running file stays, and an unchanged render writes nothing.
func TestApplyKeepsLastGood(t *testing.T) {
	lab := netlab.New(t)
	h := lab.AddHost("master-0", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	c, st := loadExample(t)
	target := host.Target{Root: nodeRoot(t), Netns: h.NS}
	ctx := context.Background()

	d, err := DesiredNode(cluster.Compile(c), st, "master-0", target.Root)
	files := d.Files
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, target, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 3 || len(res.Reloaded) != 0 {
		t.Errorf("first apply: %+v; want 3 files written, nothing reloaded (no daemon yet)", res)
	}
	confPath := filepath.Join(target.Root, onnode.KeepalivedConfPath)
	good, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(confPath)

	res, err = Apply(ctx, target, files)
	if err != nil || len(res.Written) != 0 {
		t.Errorf("unchanged apply: %+v, %v; want nothing written", res, err)
	}
	if st2, _ := os.Stat(confPath); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("unchanged apply rewrote keepalived.conf")
	}

	// A config keepalived rejects (an interface this node lacks).
	bad := append([]onnode.File{}, files...)
	for i := range bad {
		if bad[i].Path == onnode.KeepalivedConfPath {
			bad[i].Data = []byte(strings.ReplaceAll(string(bad[i].Data), "dev br-ex", "dev eth9"))
			bad[i].Data = []byte(strings.ReplaceAll(string(bad[i].Data), "interface br-ex", "interface eth9"))
		}
	}
	if _, err := Apply(ctx, target, bad); err == nil || !strings.Contains(err.Error(), "keeping the last good "+onnode.KeepalivedConfPath) {
		t.Fatalf("bad config: err = %v", err)
	}
	if now, _ := os.ReadFile(confPath); string(now) != string(good) {
		t.Error("a rejected config replaced the last good one")
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(confPath), ".*tmp*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

// TestApplyReloadsKeepalived: a changed config reaches the running
// keepalived through SIGHUP on its PID file.
func TestApplyReloadsKeepalived(t *testing.T) {
	c, st := loadExample(t)
	target := host.Target{Root: nodeRoot(t)}
	// A stand-in process that records SIGHUP: what matters here is that
	// Apply finds the PID and signals it; the lab test shows keepalived
	// itself reloading.
	if err := os.MkdirAll(filepath.Join(target.Root, onnode.RunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	if err := os.WriteFile(filepath.Join(target.Root, onnode.KeepalivedPIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := DesiredNode(cluster.Compile(c), st, "master-0", target.Root)
	files := d.Files
	if err != nil {
		t.Fatal(err)
	}
	// This test is about the reload, not the judge: the daemons' config
	// tests are replaced by /bin/true (TestApplyKeepsLastGood and the lab
	// use the real ones).
	target.Keepalived = "/bin/true"
	target.Haproxy = "/bin/true"
	if _, err := Apply(context.Background(), target, files); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sig:
	case <-time.After(2 * time.Second):
		t.Fatal("no SIGHUP after writing keepalived.conf")
	}
}

func TestInitRunFiles(t *testing.T) {
	c, err := v1alpha1.Load("../../examples/ingress-shards.yaml")
	if err != nil {
		t.Fatal(err)
	}
	target := host.Target{Root: nodeRoot(t)}
	if err := InitRunFiles(target, c); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{onnode.DrainFile: "0\n", onnode.IngressStatusFile("default"): "0\n", onnode.IngressStatusFile("internal"): "1\n"}
	for p, v := range want {
		if got, err := os.ReadFile(filepath.Join(target.Root, p)); err != nil || string(got) != v {
			t.Errorf("%s = %q, %v; want %q", p, got, err, v)
		}
	}
	// A running sidecar's state survives the init container running again.
	if err := SetIngressReady(target, "internal", true); err != nil {
		t.Fatal(err)
	}
	if err := target.WriteFlag(onnode.DrainFile, true); err != nil {
		t.Fatal(err)
	}
	if err := InitRunFiles(target, c); err != nil {
		t.Fatal(err)
	}
	for p, v := range map[string]string{onnode.DrainFile: "1\n", onnode.IngressStatusFile("internal"): "0\n"} {
		if got, _ := os.ReadFile(filepath.Join(target.Root, p)); string(got) != v {
			t.Errorf("%s = %q after InitRunFiles again, want %q", p, got, v)
		}
	}
}

// TestPruneLocalStatus: the status file of a Local Service that is gone
// goes, and so does one an earlier build wrote under the old name; those
// of current ones and every other run file stay.
func TestPruneLocalStatus(t *testing.T) {
	target := host.Target{Root: nodeRoot(t)}
	c, err := v1alpha1.Load("../../examples/ingress-shards.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := InitRunFiles(target, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"shop/web", "shop/old", "db/primary"} {
		if err := target.WriteFlag(onnode.LocalServiceStatusFile(name), false); err != nil {
			t.Fatal(err)
		}
	}
	legacy := onnode.RunDir + "/service-shop_web.status"
	if err := target.WriteFlag(legacy, false); err != nil {
		t.Fatal(err)
	}
	keep := []cluster.LocalService{{Name: "shop/web"}, {Name: "db/primary"}}
	if err := PruneLocalStatus(target, keep); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(target.Root, p))
		return err == nil
	}
	for _, p := range []string{onnode.LocalServiceStatusFile("shop/web"), onnode.LocalServiceStatusFile("db/primary"),
		onnode.DrainFile, onnode.IngressStatusFile("default"), onnode.IngressStatusFile("internal")} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	for _, p := range []string{onnode.LocalServiceStatusFile("shop/old"), legacy} {
		if exists(p) {
			t.Errorf("%s is still there", p)
		}
	}
	// Nothing left to prune is not an error.
	if err := PruneLocalStatus(target, nil); err != nil {
		t.Fatal(err)
	}
	if exists(onnode.LocalServiceStatusFile("shop/web")) {
		t.Errorf("pruning with no Local Services kept shop/web")
	}
}

// fakeVtysh is a vtysh that accepts every config (vtysh -C) and lists
// bgpd among zebra's clients, as a bgpd that reached zebra does: what
// frr.Reload asks before reloading.
func fakeVtysh(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vtysh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\ncase \"$*\" in *'client summary'*) echo 'bgp  00:00:01';; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestApplyRetriesAFailedReload: when the daemon fails to take a new
// config it runs the old one still, so the old file goes back on disk:
// the next sync finds the difference and reloads again, instead of
// taking the new file for applied and never telling the daemon.
func TestApplyRetriesAFailedReload(t *testing.T) {
	// The judge (vtysh -C) passes; frr-reload.py fails until it is
	// replaced by one that succeeds.
	target := host.Target{Root: nodeRoot(t), Vtysh: fakeVtysh(t), FRRReload: "/bin/false"}
	conf := func(timers string) []onnode.File {
		return []onnode.File{{Path: onnode.FRRConfPath, Mode: 0o644,
			Data: []byte("router bgp 64513\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 timers " + timers + "\nexit\n")}}
	}
	ctx := context.Background()
	if _, err := Apply(ctx, target, conf("1 3")); err != nil {
		t.Fatal(err)
	}
	// bgpd runs from now on: its vty socket is there.
	run := filepath.Join(target.Root, onnode.FRRRunDir)
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "bgpd.vty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	onDisk := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(target.Root, onnode.FRRConfPath))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for sync := 1; sync <= 2; sync++ {
		if _, err := Apply(ctx, target, conf("3 9")); err == nil {
			t.Fatalf("sync %d: the failed reload went unreported", sync)
		}
		if got, want := onDisk(), string(conf("1 3")[0].Data); got != want {
			t.Fatalf("sync %d: after the failed reload frr.conf holds\n%s\nwant what bgpd still runs:\n%s", sync, got, want)
		}
	}
	target.FRRReload = "/bin/true"
	res, err := Apply(ctx, target, conf("3 9"))
	if err != nil || !slices.Contains(res.Reloaded, "frr") {
		t.Fatalf("once reloading works: %+v, %v; want frr reloaded", res, err)
	}
	if got, want := onDisk(), string(conf("3 9")[0].Data); got != want {
		t.Errorf("frr.conf holds\n%s\nwant\n%s", got, want)
	}
}

// TestFRRTakesOver: FRR goes first only when its new frr.conf announces
// an address the old keepalived.conf carried as a VIP.
func TestFRRTakesOver(t *testing.T) {
	t.Parallel()
	keepalived := []byte(`vrrp_instance pool_web_0_v4 {
    unicast_src_ip 198.51.100.21
    unicast_peer {
        198.51.100.22
    }
    virtual_ipaddress {
        198.51.100.130/32 dev br-ex
    }
    track_file {
        vipctl_drain weight -99
    }
}
`)
	for _, tc := range []struct {
		frr  string
		want bool
	}{
		{" address-family ipv4 unicast\n  network 198.51.100.130/32\n", true},
		{" address-family ipv4 unicast\n  network 198.51.100.131/32 route-map other\n", false},
		// A node's own address or a peer is no VIP.
		{"  network 198.51.100.22/32\n  network 198.51.100.21/32\n", false},
	} {
		if got := frrTakesOver(keepalived, []byte(tc.frr)); got != tc.want {
			t.Errorf("%q: %t, want %t", tc.frr, got, tc.want)
		}
	}
	if frrTakesOver(nil, []byte("  network 198.51.100.130/32\n")) {
		t.Errorf("no keepalived.conf before: FRR taking over")
	}
}

// TestApplyOrdersReloads: keepalived's config goes in before FRR's (its
// reload is quick, frr-reload.py's takes seconds), unless the new frr.conf
// announces an address the old keepalived.conf held: then FRR first, so
// the routers learn it before keepalived lets it go.
func TestApplyOrdersReloads(t *testing.T) {
	h := netlab.New(t).AddHost("worker-0", netlab.HostOpts{Addrs: []string{"198.51.100.21/24"}})
	target := host.Target{Root: nodeRoot(t), Netns: h.NS, Vtysh: fakeVtysh(t), FRRReload: "/bin/true"}
	keepalived := func(vip string) onnode.File {
		return onnode.File{Path: onnode.KeepalivedConfPath, Mode: 0o644, Data: []byte(`vrrp_instance web {
    state BACKUP
    interface ` + h.Iface + `
    virtual_router_id 51
    priority 100
    virtual_ipaddress {
        ` + vip + `/32
    }
}
`)}
	}
	frrConf := func(network string) onnode.File {
		return onnode.File{Path: onnode.FRRConfPath, Mode: 0o644,
			Data: []byte("router bgp 64513\n address-family ipv4 unicast\n  network " + network + "/32\n exit-address-family\nexit\n")}
	}
	ctx := context.Background()
	if _, err := Apply(ctx, target, []onnode.File{keepalived("198.51.100.130"), frrConf("203.0.113.1")}); err != nil {
		t.Fatal(err)
	}
	order := func(files ...onnode.File) []string {
		t.Helper()
		res, err := Apply(ctx, target, files)
		if err != nil {
			t.Fatal(err)
		}
		return res.Written
	}
	if got, want := order(keepalived("198.51.100.131"), frrConf("203.0.113.2")), []string{onnode.KeepalivedConfPath, onnode.FRRConfPath}; !slices.Equal(got, want) {
		t.Errorf("a VIP and a route changing apart: written %v, want %v", got, want)
	}
	if got, want := order(keepalived("198.51.100.132"), frrConf("198.51.100.131")), []string{onnode.FRRConfPath, onnode.KeepalivedConfPath}; !slices.Equal(got, want) {
		t.Errorf("198.51.100.131 moving from keepalived to FRR: written %v, want %v", got, want)
	}
}
