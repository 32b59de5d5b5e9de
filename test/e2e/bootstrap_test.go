package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/bootstrap"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bootstrapAddr is the bootstrap host's address (spec.bootstrap).
const bootstrapAddr = "198.51.100.9"

func bootstrapClusterYAML(profile string) string {
	return bootstrapClusterYAMLAt(profile, bootstrapAddr)
}

// bootstrapClusterYAMLAt is the lab's day-1 cluster file with the
// bootstrap host at addr: a node's own address in place
// (TestBootstrapInPlace).
func bootstrapClusterYAMLAt(profile, addr string) string {
	return fmt.Sprintf(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [%s], internalPort: 22623}
  bootstrap: {addresses: [%s]}
  vrrp: {profile: %s, mode: unicast}
`, apiVIP, addr, profile)
}

// TestBootstrapHandsOverToMasters is day 1 in the lab. A bootstrap host
// (its interface ens3, as on a bootstrap VM) serves stand-in answers on
// 6443 and 22623 and runs the real `vipctl bootstrap` as its Ignition
// would have it run (`vipctl bootstrap ignition`: the inputs where the
// Ignition config puts them, the unit's command line); a client polls the
// API VIP on both ports every 10 ms from then on. Three control-plane
// nodes come up, brought in line by the product's own Reconcile with
// their apiserver and machine config server stand-ins answering: while
// the bootstrap host holds the VIP (--yield-after) they must accept its
// adverts and stay backups (never a second holder); then it yields
// make-before-break, a node takes the VIP, the bootstrap host stops and
// leaves nothing behind, and not one request may fail, during the
// hand-over or after the bootstrap host is gone.
func TestBootstrapHandsOverToMasters(t *testing.T) {
	for _, profile := range []string{"fast", "default"} {
		t.Run(profile, func(t *testing.T) { bootstrapHandover(t, profile) })
	}
}

func bootstrapHandover(t *testing.T, profile string) {
	lc := lab.New(t, bootstrapClusterYAML(profile))
	boot := lc.AddHost("bootstrap", netlab.HostOpts{Iface: "ens3", Addrs: []string{bootstrapAddr + "/24"}})
	lab.ServeAPIStandIn(t, boot, bootstrapAddr, "bootstrap", 6443, 22623)
	specs := masters(3)
	b := startBootstrap(t, boot, bootstrapClusterYAML(profile), specs, true)
	api, mcs := pollServed(t, lc, boot)

	// A node that ignored the bootstrap host's adverts would take the VIP
	// within its master-down interval and keep it beside the bootstrap
	// host: the watch, from the nodes' start on, sees it.
	lc.StartNodes(specs)
	w := watchHandover(lc, boot, apiVIP, filepath.Join(b.run, onnode.DrainFile))
	res := b.wait(t, w)
	holder := lc.WaitHolder(apiVIP, 10*time.Second, func(string) bool { return true })
	if hostHolds(boot, apiVIP) {
		t.Errorf("the bootstrap host still holds %s after it stopped", apiVIP)
	}
	leftovers(t, boot)

	api.WantNoFailures(t, "api 6443: bootstrap host -> "+holder)
	mcs.WantNoFailures(t, "api-int 22623: bootstrap host -> "+holder)
	apiOK, apiFail := api.Counts()
	mcsOK, mcsFail := mcs.Counts()
	// The bootstrap host sees the VIP leave when the new holder's first
	// advert reaches it; the lab's look at the nodes is slower (a few
	// processes each time), so it only bounds that from above.
	t.Logf("bootstrap hand-over (%s profile), %s: the VIP left the bootstrap host %d ms after it yielded (the lab saw %s hold it within %d ms); failed requests: api %d of %d, api-int %d of %d",
		profile, time.Now().Format("2006-01-02"), res.HandoverMillis, holder, w.taken.Sub(*res.YieldedAt).Milliseconds(),
		apiFail, apiOK+apiFail, mcsFail, mcsOK+mcsFail)
}

// bootstrapRun is the real `vipctl bootstrap` running on a lab host.
type bootstrapRun struct {
	proc *netlab.Proc
	// run is its --dir, result the file its -o json goes to.
	run, result string
}

// startBootstrap writes clusterYAML and the node list of specs and starts
// the real `vipctl bootstrap` on h with them (--yield-after 5s, --grace
// 2s, -o json); a failing test gets its log and its daemons'. With
// fromIgnition the inputs and the command line are those the installer's
// bootstrap machine gets from its Ignition (bootstrapFromIgnition). extra
// are more of its flags.
func startBootstrap(t *testing.T, h *netlab.Host, clusterYAML string, specs []lab.NodeSpec, fromIgnition bool, extra ...string) *bootstrapRun {
	t.Helper()
	vipctl := requireVipctl(t)
	dir := lab.SharedDir(t, "vipctl-bootstrap-")
	cfg, nodes := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "nodes.yaml")
	writeFile(t, cfg, []byte(clusterYAML))
	writeFile(t, nodes, nodeListOf(t, specs))
	args := []string{"bootstrap", "-f", cfg, "--nodes", nodes}
	if fromIgnition {
		args = bootstrapFromIgnition(t, vipctl, dir, cfg, nodes)
	}
	args = append(args, extra...)
	b := &bootstrapRun{run: filepath.Join(dir, "run"), result: filepath.Join(dir, "result.json")}
	b.proc = h.Start("vipctl-bootstrap", "sh", "-c", fmt.Sprintf("exec %s %s --dir %s --yield-after 5s --grace 2s -o json >%s",
		vipctl, strings.Join(args, " "), b.run, b.result))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- vipctl bootstrap:\n%s", b.proc.LogTail(40))
			for _, d := range []string{"keepalived", "haproxy"} {
				data, _ := os.ReadFile(filepath.Join(b.run, d+".log"))
				t.Logf("--- bootstrap %s log:\n%s", d, tailLines(string(data), 25))
			}
		}
	})
	return b
}

// pollServed waits for h to hold the API VIP, then polls VIP:6443 and
// VIP:22623 from the lab's client every 10 ms until both answer, the API
// from h's bootstrap apiserver stand-in (named "bootstrap").
func pollServed(t *testing.T, lc *lab.Cluster, h *netlab.Host) (api, mcs *lab.Poller) {
	t.Helper()
	lab.WaitFor(t, 30*time.Second, "the bootstrap host to hold the API VIP", func() bool { return hostHolds(h, apiVIP) })
	// Its haproxy starts with the nodes' servers up, none of which exists
	// yet: give its checks time to mark them down before counting.
	time.Sleep(3 * time.Second)
	api = lc.Poll("https://"+apiVIP+":6443/", 10*time.Millisecond)
	mcs = lc.Poll("https://"+apiVIP+":22623/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers from the bootstrap host", func() bool {
		a, _ := api.Counts()
		m, _ := mcs.Counts()
		return a > 50 && m > 50
	})
	if body := api.LastBody(); body != "bootstrap" {
		t.Fatalf("the API VIP answered %q before any node ran; want the bootstrap machine", body)
	}
	return api, mcs
}

// wait waits for the run to exit 0 and stops w, failing t if a node held
// the VIP before the bootstrap host yielded or none held it after; it
// returns what -o json said, which must tell a hand-over.
func (b *bootstrapRun) wait(t *testing.T, w *handoverWatch) bootstrap.Result {
	t.Helper()
	if err := b.proc.Wait(90 * time.Second); err != nil {
		t.Fatalf("vipctl bootstrap: %v", err)
	}
	w.stop()
	if len(w.split) > 0 {
		t.Errorf("a node held the API VIP while the bootstrap host had not yielded: %v", w.split)
	}
	if w.taken.IsZero() {
		t.Fatal("no node ever held the VIP")
	}
	var res bootstrap.Result
	data, err := os.ReadFile(b.result)
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	if err != nil || res.YieldedAt == nil || res.LeftAt == nil || res.StoppedAt == nil {
		t.Fatalf("vipctl bootstrap -o json: %v: %s", err, data)
	}
	return res
}

// watchInterval is how often watchHandover looks.
const watchInterval = 50 * time.Millisecond

// handoverWatch records, from the lab's side, when a node first held the
// VIP after the bootstrap host yielded (its drain file), and every moment
// a node held it before.
type handoverWatch struct {
	yielded, taken time.Time
	split          []string
	done           chan struct{}
	wg             sync.WaitGroup
}

func watchHandover(lc *lab.Cluster, boot *netlab.Host, vip, drainFile string) *handoverWatch {
	w := &handoverWatch{done: make(chan struct{})}
	w.wg.Go(func() {
		for {
			select {
			case <-w.done:
				return
			case <-time.After(watchInterval):
			}
			now := time.Now()
			drained, _ := os.ReadFile(drainFile)
			if w.yielded.IsZero() && strings.TrimSpace(string(drained)) == "1" {
				w.yielded = now
			}
			holders := lc.Holders(vip)
			if len(holders) == 0 {
				continue
			}
			if w.yielded.IsZero() {
				w.split = append(w.split, fmt.Sprintf("%s: %v with the bootstrap host holding %v", now.Format("15:04:05.000"), holders, hostHolds(boot, vip)))
			} else if w.taken.IsZero() {
				w.taken = now
			}
		}
	})
	return w
}

func (w *handoverWatch) stop() {
	close(w.done)
	w.wg.Wait()
}

// hostHolds tells whether vip is on one of h's interfaces.
func hostHolds(h *netlab.Host, vip string) bool {
	out, err := h.Exec("ip", "-o", "addr", "show")
	return err == nil && strings.Contains(string(out), " "+vip+"/")
}

// leftovers fails t for anything vipctl bootstrap set up in the host's
// network namespace and left there: nftables tables, local routes, IPv6
// rules to its takeover table.
func leftovers(t *testing.T, h *netlab.Host) {
	t.Helper()
	for _, c := range []struct {
		argv []string
		bad  string
	}{
		{[]string{"nft", "list", "tables"}, "vipctl"},
		{[]string{"ip", "route", "show", "table", "local", "proto", "118"}, "local"},
		{[]string{"ip", "-6", "rule", "show"}, "30326"},
	} {
		out, err := h.Exec(c.argv...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), c.bad) {
			t.Errorf("vipctl bootstrap left behind (%s):\n%s", strings.Join(c.argv, " "), out)
		}
	}
}

// nodeListOf is the node list of specs as `oc get nodes -o yaml` would
// print it: what `vipctl render --nodes` and `vipctl bootstrap --nodes`
// read.
func nodeListOf(t *testing.T, specs []lab.NodeSpec) []byte {
	t.Helper()
	var items []corev1.Node
	for _, s := range specs {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: map[string]string{}}}
		if s.ControlPlane {
			n.Labels["node-role.kubernetes.io/master"] = ""
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: strings.Split(s.Addr, "/")[0]}}
		items = append(items, n)
	}
	data, skipped, err := cluster.BootstrapNodeList(items)
	if err != nil || len(skipped) > 0 {
		t.Fatalf("node list: %v %v", err, skipped)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
