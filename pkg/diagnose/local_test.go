package diagnose

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestLocal: on a node laid out by the real renderer (master-0 of the
// compact example: keepalived.conf, haproxy.cfg, the scripts, the static
// pods, the last-good view, the track files) in a network namespace of
// its own holding the API VIP, with the real haproxy running its rendered
// config, the local part keeps every file under its node path, the
// haproxy's answers, the interfaces' addresses and the API VIP as held by
// the api instance; a secret an admin put into keepalived.conf and the
// kubeconfig's key are redacted.
func TestLocal(t *testing.T) {
	lab := netlab.New(t)
	c := fixture.Example(t, "compact-ipv4.yaml")
	node := lab.AddHost("master-0", netlab.HostOpts{Iface: c.Spec.VRRP.Interface,
		Addrs: []string{"198.51.100.11/24", c.Spec.API.VIPs[0] + "/32"}})
	target := host.Target{Root: t.TempDir(), Netns: node.NS}
	nodes, err := cluster.LoadNodeList(fixture.Repo("examples/nodes/compact.yaml"), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	st := cluster.State{Nodes: nodes}
	desired, err := runtimecfg.DesiredNode(cluster.Compile(c), st, "master-0", target.Root)
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := render.ScriptFiles()
	if err != nil {
		t.Fatal(err)
	}
	pods, err := manifests.StaticPodFiles(c, "master")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range slices.Concat(desired.Files, scripts, pods) {
		if _, err := target.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := runtimecfg.InitRunFiles(target, c); err != nil {
		t.Fatal(err)
	}
	if _, err := runtimecfg.SaveLastGood(target, "master-0", c, st); err != nil {
		t.Fatal(err)
	}
	// What an admin may add by hand, and the node's credentials.
	conf := target.Path(render.KeepalivedConfPath)
	rendered, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(rendered), "vrrp_instance", "# authentication { auth_type PASS auth_pass Vrrp-S3cret }\nvrrp_instance", 1)
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: system:node:master-0\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key-data: S2V5LURhdGEtU2VjcmV0\n"
	if _, err := target.WriteFile(render.NodeKubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(target.Path(render.HaproxyRunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	haproxy := node.Start("haproxy", manifests.HaproxyCommand(target.Root)...)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for sidecar.DaemonPIDs(ctx, target)[sidecar.DaemonHaproxy] == 0 {
		if haproxy.Exited() || time.Now().After(deadline) {
			t.Fatalf("haproxy does not answer on its master socket:\n%s", haproxy.LogTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}

	a := Local(ctx, LocalOptions{Target: target, Node: "master-0", Now: time.Now()})
	dir := LocalDir("master-0")
	file := func(name string) string {
		t.Helper()
		b, ok := a.File(path.Join(dir, name))
		if !ok {
			t.Fatalf("no %s in %v (problems %v)", name, a.Names(), a.Problems())
		}
		return string(b)
	}
	// Every rendered file under its node path, byte for byte (but the
	// redacted line).
	for _, f := range slices.Concat(desired.Files, scripts, pods) {
		got := file("files" + f.Path)
		if f.Path == render.KeepalivedConfPath {
			if strings.Contains(got, "Vrrp-S3cret") || !strings.Contains(got, "auth_pass <redacted> }") {
				t.Errorf("keepalived.conf's auth_pass not redacted:\n%s", got)
			}
			got = strings.Replace(got, "# authentication { auth_type PASS auth_pass <redacted> }\n", "", 1)
		}
		if got != string(f.Data) {
			t.Errorf("%s differs from what was rendered", f.Path)
		}
	}
	if kc := file("files" + render.NodeKubeconfig); strings.Contains(kc, "S2V5LURhdGEtU2VjcmV0") || !strings.Contains(kc, "client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem") {
		t.Errorf("kubeconfig: key kept or certificate path lost:\n%s", kc)
	}
	if lg := file("files" + render.LastGoodPath); !strings.Contains(lg, `"node": "master-0"`) {
		t.Errorf("last-good view:\n%s", lg)
	}
	if d := file("files" + render.DrainFile); d != "0\n" {
		t.Errorf("drain track file %q", d)
	}
	var records []FileRecord
	if err := json.Unmarshal([]byte(file("files.json")), &records); err != nil {
		t.Fatal(err)
	}
	missing := map[string]bool{}
	for _, r := range records {
		missing[r.Path] = !r.Present
	}
	if !missing[render.NodePath(render.FRRConfPath)] || missing[render.HaproxyConfPath] || missing[render.IngressStatusFile(v1alpha1.DefaultIngressController)] {
		t.Errorf("files.json: want frr.conf missing (no bgp pools), haproxy.cfg and the default ingress track file present: %+v", records)
	}

	var d Daemons
	if err := json.Unmarshal([]byte(file("daemons/daemons.json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Running[sidecar.DaemonHaproxy] != haproxy.PID() || d.BGPd != "not running" {
		t.Errorf("daemons: %+v, want haproxy as PID %d and bgpd not running", d, haproxy.PID())
	}
	if proc := file("daemons/haproxy-proc.txt"); !strings.Contains(proc, "master") {
		t.Errorf("haproxy show proc:\n%s", proc)
	}
	if info := file("daemons/haproxy-info.txt"); !strings.Contains(info, "Name: HAProxy") {
		t.Errorf("haproxy show info:\n%s", info)
	}
	if stat := file("daemons/haproxy-stat.csv"); !strings.HasPrefix(stat, "# pxname,svname,") {
		t.Errorf("haproxy show stat:\n%s", stat)
	}

	ip := file("network/ip-addr.txt")
	if !strings.Contains(ip, c.Spec.VRRP.Interface) || !strings.Contains(ip, "198.51.100.11/24") || !strings.Contains(ip, c.Spec.API.VIPs[0]+"/32") {
		t.Errorf("ip-addr.txt:\n%s", ip)
	}
	var held []Held
	if err := json.Unmarshal([]byte(file("held-vips.json")), &held); err != nil {
		t.Fatal(err)
	}
	if want := []Held{{Address: c.Spec.API.VIPs[0], Instance: v1alpha1.KeyAPI}}; !slices.Equal(held, want) {
		t.Errorf("held VIPs %+v, want %+v", held, want)
	}
	if p := a.Problems(); len(p) != 0 {
		t.Errorf("problems: %+v", p)
	}
}

// TestLocalBGP: with the real FRR running as the keepalived pod's frr
// container does, the local part asks bgpd for its sessions both where
// the pod has its sockets and where the host keeps them (the pod's
// directories are vipctl's own on the host: render.NodePath), and keeps
// frr.conf with its BGP password redacted.
func TestLocalBGP(t *testing.T) {
	nl := netlab.New(t)
	h := nl.AddHost("worker-0", netlab.HostOpts{Addrs: []string{"198.51.100.21/24"}})
	pod := lab.SharedDir(t, "vipctl-diagnose-frr-")
	lab.WriteFRRConf(t, pod, "frr defaults datacenter", "router bgp 64512",
		" neighbor 198.51.100.1 remote-as 64512", " neighbor 198.51.100.1 password bgp-S3cret")
	lab.StartFRR(t, h, pod)
	// The host's view of the same directories.
	hostRoot := t.TempDir()
	for from, to := range map[string]string{render.FRRDir: render.NodePath(render.FRRConfPath), render.FRRRunDir: render.NodePath(render.FRRRunDir + "/x")} {
		link := filepath.Join(hostRoot, filepath.Dir(to))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(pod, from), link); err != nil {
			t.Fatal(err)
		}
	}
	for name, root := range map[string]string{"in the pod": pod, "on the host": hostRoot} {
		a := Local(context.Background(), LocalOptions{Target: host.Target{Root: root, Netns: h.NS}, Node: "worker-0", Now: time.Now()})
		dir := LocalDir("worker-0")
		daemons, _ := a.File(path.Join(dir, "daemons", "daemons.json"))
		sessions, ok := a.File(path.Join(dir, "daemons", "bgp-sessions.json"))
		if !ok || !strings.Contains(string(sessions), `"198.51.100.1"`) || !strings.Contains(string(daemons), `"bgpd": "answering"`) {
			t.Errorf("%s: bgpd's sessions not gathered: %s\n%s\nproblems %v", name, daemons, sessions, a.Problems())
		}
		conf := render.FRRConfPath
		if root == hostRoot {
			conf = render.NodePath(conf)
		}
		got, ok := a.File(path.Join(dir, "files", conf))
		if !ok || strings.Contains(string(got), "bgp-S3cret") || !strings.Contains(string(got), "neighbor 198.51.100.1 password <redacted>") {
			t.Errorf("%s: %s: %q", name, conf, got)
		}
	}
}
