package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
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
	scripts := render.ScriptFiles()
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
	conf := target.Path(onnode.KeepalivedConfPath)
	rendered, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(rendered), "vrrp_instance", "# authentication { auth_type PASS auth_pass Vrrp-S3cret }\nvrrp_instance", 1)
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: system:node:master-0\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key-data: S2V5LURhdGEtU2VjcmV0\n"
	if _, err := target.WriteFile(onnode.NodeKubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(target.Path(onnode.HaproxyRunDir), 0o755); err != nil {
		t.Fatal(err)
	}
	proc := node.Start("haproxy", haproxy.Args(target.Root)...)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for sidecar.DaemonPIDs(ctx, target)[sidecar.DaemonHaproxy] == 0 {
		if proc.Exited() || time.Now().After(deadline) {
			t.Fatalf("haproxy does not answer on its master socket:\n%s", proc.LogTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}

	a, file := gatherLocal(ctx, t, target, "master-0")
	// Every rendered file under its node path, byte for byte (but the
	// redacted line).
	for _, f := range slices.Concat(desired.Files, scripts, pods) {
		got := file("files" + f.Path)
		if f.Path == onnode.KeepalivedConfPath {
			if strings.Contains(got, "Vrrp-S3cret") || !strings.Contains(got, "auth_pass <redacted> }") {
				t.Errorf("keepalived.conf's auth_pass not redacted:\n%s", got)
			}
			got = strings.Replace(got, "# authentication { auth_type PASS auth_pass <redacted> }\n", "", 1)
		}
		if got != string(f.Data) {
			t.Errorf("%s differs from what was rendered", f.Path)
		}
	}
	if kc := file("files" + onnode.NodeKubeconfig); strings.Contains(kc, "S2V5LURhdGEtU2VjcmV0") || !strings.Contains(kc, "client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem") {
		t.Errorf("kubeconfig: key kept or certificate path lost:\n%s", kc)
	}
	if lg := file("files" + onnode.LastGoodPath); !strings.Contains(lg, `"node": "master-0"`) {
		t.Errorf("last-good view:\n%s", lg)
	}
	if d := file("files" + onnode.DrainFile); d != "0\n" {
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
	if !missing[onnode.NodePath(onnode.FRRConfPath)] || missing[onnode.HaproxyConfPath] || missing[onnode.IngressStatusFile(v1alpha1.DefaultIngressController)] {
		t.Errorf("files.json: want frr.conf missing (no bgp pools), haproxy.cfg and the default ingress track file present: %+v", records)
	}

	var d Daemons
	if err := json.Unmarshal([]byte(file("daemons/daemons.json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Running[sidecar.DaemonHaproxy] != proc.PID() || d.BGPd != "not running" {
		t.Errorf("daemons: %+v, want haproxy as PID %d and bgpd not running", d, proc.PID())
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
	// No keepalived runs here (TestLocalKeepalived has one): a problem
	// recorded, the rest gathered.
	if p, want := a.Problems(), []Problem{{What: "keepalived", Error: "not running: no " + onnode.KeepalivedPIDFile}}; !slices.Equal(p, want) {
		t.Errorf("problems: %+v, want %+v", p, want)
	}
	if nft := file("network/nftables.txt"); nft != "" {
		t.Errorf("nftables.txt of a namespace without tables:\n%s", nft)
	}
}

// TestLocalKeepalived: on master-0 brought in line by Reconcile (its
// files, the API redirect and the internal API's guard in table inet
// vipctl, the handover tables) beside another's nftables table, with the
// real keepalived running its keepalived.conf, to which an admin added an
// auth_pass, in a PID namespace of its own as in its pod (diagnose sees
// it from outside, as from oc debug node), the local part holds
// keepalived's data, statistics and JSON dumps, every password redacted,
// and a summary of every instance with its state: the ingress instance in
// FAULT (no router ready on the node), the others BACKUP or MASTER, as
// far as they got. It holds every nftables table as nft prints it, where
// nft can, and vipctl's own read over netlink, the VIPs in the handover
// set.
func TestLocalKeepalived(t *testing.T) {
	nl := netlab.New(t)
	c := fixture.Example(t, "compact-ipv4.yaml")
	node := nl.AddHost("master-0", netlab.HostOpts{Iface: c.Spec.VRRP.Interface, Addrs: []string{"198.51.100.11/24"}})
	target := host.Target{Root: t.TempDir(), Netns: node.NS}
	nodes, err := cluster.LoadNodeList(fixture.Repo("examples/nodes/compact.yaml"), c.Spec.VRRP.Interface)
	if err != nil {
		t.Fatal(err)
	}
	scripts := render.ScriptFiles()
	for _, f := range scripts {
		if _, err := target.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := runtimecfg.InitRunFiles(target, c); err != nil {
		t.Fatal(err)
	}
	if err := runtimecfg.SetIngressReady(target, v1alpha1.DefaultIngressController, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := cluster.State{Nodes: nodes}
	if _, err := runtimecfg.NewNode(target, "master-0", nil).Reconcile(ctx, runtimecfg.Input{Model: cluster.Compile(c), State: st}); err != nil {
		t.Fatal(err)
	}
	if _, err := runtimecfg.SaveLastGood(target, "master-0", c, st); err != nil {
		t.Fatal(err)
	}
	node.MustExec("nft", "add", "table", "inet", "lab-firewall")
	conf := target.Path(onnode.KeepalivedConfPath)
	rendered, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var instances []string
	for _, m := range regexp.MustCompile(`(?m)^vrrp_instance (\S+) \{`).FindAllStringSubmatch(string(rendered), -1) {
		instances = append(instances, m[1])
	}
	slices.Sort(instances)
	// A password with a blank: keepalived's data dump prints it bare.
	edited := strings.Replace(string(rendered), "vrrp_instance api_v4 {\n",
		"vrrp_instance api_v4 {\n    authentication {\n        auth_type PASS\n        auth_pass \"Vr S3cr\"\n    }\n", 1)
	if edited == string(rendered) {
		t.Fatalf("no instance api_v4 in keepalived.conf:\n%s", rendered)
	}
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	// PID 1 of the namespace is a shell, as the pod's is its pause
	// process; keepalived's /tmp is the node's own, as a container's is.
	argv := append([]string{"unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", `"$@" & wait`, "pidns",
		"env", "TMPDIR=" + target.Path("/tmp")}, keepalived.Args(target.Root)...)
	if err := os.MkdirAll(target.Path("/tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	kproc := node.Start("keepalived", argv...)
	// Ready once every instance has its first state.
	entered := regexp.MustCompile(`(?i)\((\w+)\) entering (BACKUP|MASTER|FAULT) state`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := os.ReadFile(kproc.Log)
		started := map[string]bool{}
		for _, m := range entered.FindAllStringSubmatch(string(log), -1) {
			started[m[1]] = true
		}
		if len(started) == len(instances) {
			break
		}
		if kproc.Exited() || time.Now().After(deadline) {
			t.Fatalf("keepalived did not start every instance of %v:\n%s", instances, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its PID file holds its PID in its own namespace: here another
	// process's.
	pid := sidecar.DaemonPIDs(ctx, target)[sidecar.DaemonKeepalived]
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); pid == 0 || strings.Contains(string(cmdline), target.Root) {
		t.Fatalf("keepalived's PID file says %d, its PID here: not in a PID namespace of its own", pid)
	}

	a, file := gatherLocal(ctx, t, target, "master-0")
	var summary []KeepalivedInstance
	if err := json.Unmarshal([]byte(file("daemons/keepalived-instances.json")), &summary); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range summary {
		names = append(names, in.Name)
		want := []string{"BACKUP", "MASTER"}
		if in.Name == "ingress_v4" {
			want = []string{"FAULT"}
		}
		if !slices.Contains(want, in.State) || in.Interface != c.Spec.VRRP.Interface || in.Priority == 0 || len(in.VIPs) == 0 {
			t.Errorf("instance %+v, want state %v on %s", in, want, c.Spec.VRRP.Interface)
		}
		if in.Name == "api_v4" && !slices.Equal(in.VIPs, c.Spec.API.VIPs) {
			t.Errorf("api_v4's VIPs %v, want %v", in.VIPs, c.Spec.API.VIPs)
		}
	}
	if !slices.Equal(names, instances) {
		t.Errorf("instances %v, want those of keepalived.conf %v", names, instances)
	}
	if data := file("daemons/keepalived.data"); !strings.Contains(data, "VRRP Instance = ingress_v4") || !strings.Contains(data, "State = FAULT") ||
		!strings.Contains(data, "Password = <redacted>\n") {
		t.Errorf("keepalived.data:\n%s", data)
	}
	if j := file("daemons/keepalived.json"); !strings.Contains(j, `"iname":"api_v4"`) || !strings.Contains(j, `"auth_data":"<redacted>"`) {
		t.Errorf("keepalived.json:\n%s", j)
	}
	if stats := file("daemons/keepalived.stats"); !strings.Contains(stats, "VRRP Instance: api_v4") {
		t.Errorf("keepalived.stats:\n%s", stats)
	}
	for _, name := range a.Names() {
		if b, _ := a.File(name); strings.Contains(string(b), "S3cr") {
			t.Errorf("%s holds the auth_pass", name)
		}
	}

	nft := file("network/nftables.txt")
	for _, want := range []string{"table inet lab-firewall", "table inet " + dataplane.RedirectTable, "redirect to :"} {
		if !strings.Contains(nft, want) {
			t.Errorf("nftables.txt lacks %q:\n%s", want, nft)
		}
	}
	var own []dataplane.TableDump
	if err := json.Unmarshal([]byte(file("network/nftables-vipctl.json")), &own); err != nil {
		t.Fatal(err)
	}
	var vips []string
	tables := map[dataplane.NFTable]bool{}
	for _, tb := range own {
		tables[tb.NFTable] = true
		for _, s := range tb.Sets {
			for _, e := range s.Elements {
				if tb.Name == dataplane.HandoverTable && s.Name == "vips" {
					vips = append(vips, e.Key)
				}
			}
		}
	}
	if !tables[dataplane.NFTable{Family: "inet", Name: dataplane.RedirectTable}] || !tables[dataplane.NFTable{Family: "ip", Name: dataplane.HandoverTable}] ||
		!slices.Contains(vips, c.Spec.API.VIPs[0]) {
		t.Errorf("vipctl's tables %v, handover VIPs %v:\n%s", tables, vips, file("network/nftables-vipctl.json"))
	}
	// nft lists every table, the handover tables too (until 2026-12-01
	// nft 1.0.6, Debian bookworm's, aborted on them: a problem noted in
	// place).
	for _, p := range a.Problems() {
		t.Errorf("problem %+v", p)
	}
	if text := file("network/nftables.txt"); !strings.Contains(text, "table ip "+dataplane.HandoverTable) {
		t.Errorf("nftables.txt lists no handover table:\n%s", text)
	}
}

// TestLocalBGP: with the real FRR running as the keepalived pod's frr
// container does, the local part asks bgpd for its sessions both where
// the pod has its sockets and where the host keeps them (the pod's
// directories are vipctl's own on the host: onnode.NodePath), and keeps
// frr.conf with its BGP password redacted.
func TestLocalBGP(t *testing.T) {
	nl := netlab.New(t)
	h := nl.AddHost("worker-0", netlab.HostOpts{Addrs: []string{"198.51.100.21/24"}})
	pod := lab.SharedDir(t, "vipctl-diagnose-frr-")
	lab.WriteFRRConf(t, pod, "frr defaults datacenter",
		"ip prefix-list vipctl-pool-web-4 seq 5 permit 203.0.113.192/28 le 32",
		"route-map vipctl-out permit 100", " match ip address prefix-list vipctl-pool-web-4", " set community 64512:7 additive", "exit",
		"router bgp 64512",
		" neighbor 198.51.100.1 remote-as 64512", " neighbor 198.51.100.1 password bgp-S3cret")
	lab.StartFRR(t, h, pod)
	// The host's view of the same directories.
	hostRoot := t.TempDir()
	for from, to := range map[string]string{onnode.FRRDir: onnode.NodePath(onnode.FRRConfPath), onnode.FRRRunDir: onnode.NodePath(onnode.FRRRunDir + "/x")} {
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
		policy, _ := a.File(path.Join(dir, "daemons", "bgp-policy.txt"))
		for _, want := range []string{"route-map: vipctl-out", "community 64512:7 additive", "vipctl-pool-web-4", "203.0.113.192/28 le 32"} {
			if !strings.Contains(string(policy), want) {
				t.Errorf("%s: bgp-policy.txt lacks %q:\n%s", name, want, policy)
			}
		}
		conf := onnode.FRRConfPath
		if root == hostRoot {
			conf = onnode.NodePath(conf)
		}
		got, ok := a.File(path.Join(dir, "files", conf))
		if !ok || strings.Contains(string(got), "bgp-S3cret") || !strings.Contains(string(got), "neighbor 198.51.100.1 password <redacted>") {
			t.Errorf("%s: %s: %q", name, conf, got)
		}
	}
}

// gatherLocal runs Local on the node and returns the archive and a reader
// of its files by their names under the node's directory, which fails the
// test for a file not there.
func gatherLocal(ctx context.Context, t *testing.T, target host.Target, node string) (*Archive, func(name string) string) {
	a := Local(ctx, LocalOptions{Target: target, Node: node, Now: time.Now()})
	return a, func(name string) string {
		t.Helper()
		b, ok := a.File(path.Join(LocalDir(node), name))
		if !ok {
			t.Fatalf("no %s in %v (problems %v)", name, a.Names(), a.Problems())
		}
		return string(b)
	}
}
