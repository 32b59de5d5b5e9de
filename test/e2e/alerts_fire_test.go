package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
)

// alertFor is every alert's `for:` in the tests that fire alerts live,
// and alertWindow every range an alert counts increases over (5m, 15m,
// 30m) and the time a foreign router's adverts stay recent (3m): the
// expressions and labels are the rendered ones, the times are cut so that
// the lab need not wait minutes (promtool's cases in pkg/manifests prove
// each real time).
const (
	alertFor    = "2s"
	alertWindow = 8 * time.Second
)

// scrapeTarget is one registry the lab's Prometheus scrapes, with the
// job and node labels the rendered ServiceMonitors give its series.
type scrapeTarget struct {
	job, node string
	reg       prometheus.Gatherer
}

// sidecarTargets are the sidecars of kc, each as its node's target.
func sidecarTargets(kc *lab.KubeCluster) []scrapeTarget {
	var out []scrapeTarget
	for _, n := range kc.Nodes {
		if sc, ok := kc.Sidecars[n.Name]; ok {
			out = append(out, scrapeTarget{job: manifests.NodeMetricsName, node: n.Name, reg: sc.Registry})
		}
	}
	return out
}

// alertWatch is a real Prometheus that scrapes the targets every second
// and evaluates vipctl's rendered alerts (alertFor, alertWindow).
type alertWatch struct {
	t    *testing.T
	prom *lab.Prometheus
	// targets serve each registry, by node (by job for a target of no
	// node).
	targets map[string]*metricsTarget
}

// metricsTarget serves one registry on a port of its own, as its metrics
// endpoint does (authorization is TestMetricsEndpointsAuthorizeScrapers').
type metricsTarget struct {
	addr string
	reg  prometheus.Gatherer
	srv  *http.Server
}

// serve listens on the target's port (any, the first time).
func (m *metricsTarget) serve(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	m.addr = ln.Addr().String()
	srv := &http.Server{Handler: promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.srv = srv
}

// watchAlerts serves each target and starts the Prometheus over them,
// with the rules rendered for c.
func watchAlerts(t *testing.T, c *v1alpha1.ClusterVIPs, targets ...scrapeTarget) *alertWatch {
	t.Helper()
	w := &alertWatch{t: t, targets: map[string]*metricsTarget{}}
	byJob := map[string]*strings.Builder{}
	var jobs []string
	for _, tg := range targets {
		m := &metricsTarget{addr: "127.0.0.1:0", reg: tg.reg}
		m.serve(t)
		key, labels := tg.job, "{}"
		if tg.node != "" {
			key, labels = tg.node, "{node: "+tg.node+"}"
		}
		w.targets[key] = m
		if byJob[tg.job] == nil {
			byJob[tg.job] = &strings.Builder{}
			jobs = append(jobs, tg.job)
		}
		fmt.Fprintf(byJob[tg.job], "  - {targets: [%q], labels: %s}\n", m.addr, labels)
	}
	groups := manifests.PrometheusRule(c).Spec.Groups
	window := regexp.MustCompile(`\[\d+m\]`)
	for i := range groups {
		for j := range groups[i].Rules {
			r := &groups[i].Rules[j]
			d := monitoringv1.Duration(alertFor)
			r.For = &d
			expr := window.ReplaceAllString(r.Expr.String(), "["+alertWindow.String()+"]")
			expr = strings.ReplaceAll(expr, fmt.Sprintf("< %d)", manifests.ForeignRecent), fmt.Sprintf("< %d)", int(alertWindow.Seconds())))
			r.Expr = intstr.FromString(expr)
		}
	}
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	var config strings.Builder
	config.WriteString("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n")
	for _, job := range jobs {
		fmt.Fprintf(&config, "- job_name: %s\n  static_configs:\n%s", job, byJob[job])
	}
	w.prom = lab.StartPrometheus(t, t.TempDir(), config.String(), map[string][]byte{"rules.yaml": rules})
	// Every target scraped, then two evaluations over what they said:
	// whatever is true is pending or firing from then on.
	lab.WaitFor(t, 30*time.Second, "every target scraped", func() bool {
		var up int
		for _, tg := range w.prom.TargetList(t) {
			if tg.Health == "up" {
				up++
			}
		}
		return up == len(targets)
	})
	time.Sleep(2 * time.Second)
	return w
}

// firingLabels are the labels firing shows of an alert, where it has
// them.
var firingLabels = []string{"vip", "node", "peer", "pool", "vrid", "source"}

// firing lists the alerts firing now, each as its name and
// firingLabels, and counts those pending (true for less than `for:`).
func (w *alertWatch) firing() (out []string, pending int) {
	for _, a := range w.prom.Alerts(w.t) {
		if a.State != "firing" {
			pending++
			continue
		}
		s := a.Labels["alertname"]
		for _, k := range firingLabels {
			if v, ok := a.Labels[k]; ok {
				s += " " + k + "=" + v
			}
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, pending
}

// expect waits until exactly want fire and none is pending (none: all
// quiet), within the longest an alert of the lab takes to fire or
// resolve.
func (w *alertWatch) expect(what string, want ...string) {
	w.t.Helper()
	slices.Sort(want)
	var got []string
	var pending int
	if !lab.WaitUntil(alertWindow+30*time.Second, func() bool {
		got, pending = w.firing()
		return pending == 0 && slices.Equal(got, want)
	}) {
		w.t.Fatalf("%s: firing %q (%d pending), want %q", what, got, pending, want)
	}
}

// stopTarget stops serving a target's metrics (a node's name, or a
// job's): its scrapes fail, as when its pod is gone.
func (w *alertWatch) stopTarget(key string) { _ = w.targets[key].srv.Close() }

// startTarget serves a stopped target's metrics again, on its port.
func (w *alertWatch) startTarget(key string) { w.targets[key].serve(w.t) }

// TestAlertsFireOnFaults: a real Prometheus scrapes the sidecars of two
// control-plane nodes (real keepalived, real apiserver) and evaluates the
// rendered alerts; each fault induced in the lab fires its alert with the
// right labels, and the alert resolves once the fault is fixed:
//   - a split brain (VRRP dropped between the two nodes): both hold the
//     API VIP, VipctlVIPSplitBrain;
//   - holder loss without a survivor (keepalived stopped on both):
//     VipctlVIPNotHeld;
//   - a config the nodes cannot take (the ConfigMap made invalid):
//     VipctlConfigInvalid, and VipctlConfigKept for each node, which
//     keeps its last good config meanwhile;
//   - a node drained and left so: VipctlNodeDrainedTooLong;
//   - a sidecar's metrics endpoint gone: VipctlMetricsDown;
//   - the API away (kube-apiserver stopped): VipctlSidecarAPIUnreachable
//     for each node.
//
// No other alert fires meanwhile.
func TestAlertsFireOnFaults(t *testing.T) {
	cfgYAML := clusterYAML("fast", "unicast", "")
	kc := lab.StartKube(t, cfgYAML, masters(2))
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	kc.Settled(apiVIP)

	c, err := v1alpha1.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	w := watchAlerts(t, c, sidecarTargets(kc)...)
	expect := w.expect
	expect("a healthy cluster")

	// Split brain: neither node hears the other's adverts; both take the
	// VIP.
	for _, n := range kc.Nodes {
		n.Host.MustExec("nft", "add table inet alertlab")
		n.Host.MustExec("nft", "add chain inet alertlab in { type filter hook input priority -300 ; }")
		n.Host.MustExec("nft", "add rule inet alertlab in meta l4proto 112 drop")
	}
	expect("VRRP dropped between the nodes", "VipctlVIPSplitBrain vip="+apiVIP)
	for _, n := range kc.Nodes {
		n.Host.MustExec("nft", "delete table inet alertlab")
	}
	expect("VRRP back")

	// No survivor: keepalived stopped everywhere takes the VIP off.
	for _, n := range kc.Nodes {
		n.Keepalived.Stop()
	}
	expect("keepalived stopped on every node", "VipctlVIPNotHeld vip="+apiVIP)
	for _, n := range kc.Nodes {
		n.StartKeepalived()
	}
	kc.Settled(apiVIP)
	expect("keepalived back")

	// An invalid ConfigMap: every sidecar keeps its last valid pools.
	ctx := context.Background()
	cms := kc.Admin.CoreV1().ConfigMaps(onnode.Namespace)
	cm, err := cms.Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := cm.Data[v1alpha1.ConfigMapKey]
	cm.Data[v1alpha1.ConfigMapKey] = "apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\nspec: {servicePools: [{name: web, addresses: [198.51.100.0/33]}]}\n"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("an invalid ConfigMap", "VipctlConfigInvalid", "VipctlConfigKept node=master-0", "VipctlConfigKept node=master-1")
	cm.Data[v1alpha1.ConfigMapKey] = good
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the ConfigMap fixed")

	// A node drained (keepalived's preStop, `vipctl drain`) and left so.
	drained := kc.ByName["master-1"]
	kc.Drain(drained)
	expect("master-1 drained", "VipctlNodeDrainedTooLong node=master-1")
	drained.Undrain(t)
	expect("master-1 undrained")

	// A sidecar whose metrics cannot be scraped (its pod gone, its port
	// closed); not the holder's, whose VIP would then seem held by
	// nobody (docs/alerts.md, VipctlMetricsDown).
	holder := kc.Settled(apiVIP)
	var quiet string
	for _, n := range kc.Nodes {
		if n.Name != holder {
			quiet = n.Name
		}
	}
	w.stopTarget(quiet)
	expect("the metrics of "+quiet+" unreachable", "VipctlMetricsDown node="+quiet)
	w.startTarget(quiet)
	expect("the metrics of " + quiet + " back")

	// The API away: every sidecar's watches fail.
	kc.API.RestartAPIServer(t, func() {
		expect("the API away", "VipctlSidecarAPIUnreachable node=master-0", "VipctlSidecarAPIUnreachable node=master-1")
	})
	expect("the API back")
}
