package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/lab"
)

// alertFor is every alert's `for:` in TestAlertsFireOnFaults: the
// expressions and labels are the rendered ones, the hold time is cut so
// that the lab need not wait minutes (promtool's cases in
// pkg/manifests prove each real `for:`).
const alertFor = "3s"

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
//     keeps its last good config meanwhile.
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

	// Each sidecar's registry on a port of its own, as its metrics
	// endpoint serves it (authorization is TestMetricsEndpointsAuthorizeScrapers').
	var targets strings.Builder
	for _, n := range kc.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(kc.Sidecars[n.Name].Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		fmt.Fprintf(&targets, "  - {targets: [%q], labels: {node: %s}}\n", ln.Addr().String(), n.Name)
	}
	c, err := v1alpha1.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	groups := manifests.PrometheusRule(c).Spec.Groups
	for i := range groups {
		for j := range groups[i].Rules {
			d := monitoringv1.Duration(alertFor)
			groups[i].Rules[j].For = &d
		}
	}
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	prom := lab.StartPrometheus(t, t.TempDir(), fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
- job_name: %s
  static_configs:
%s`, manifests.NodeMetricsName, targets.String()), map[string][]byte{"rules.yaml": rules})

	firing := func() []string {
		var out []string
		for _, a := range prom.Alerts(t) {
			if a.State != "firing" {
				continue
			}
			s := a.Labels["alertname"]
			for _, k := range []string{"vip", "node"} {
				if v, ok := a.Labels[k]; ok {
					s += " " + k + "=" + v
				}
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	expect := func(what string, want ...string) {
		t.Helper()
		var got []string
		if !lab.WaitUntil(30*time.Second, func() bool { got = firing(); return slices.Equal(got, want) }) {
			t.Fatalf("%s: firing %q, want %q", what, got, want)
		}
	}
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
	cms := kc.Admin.CoreV1().ConfigMaps(render.Namespace)
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
}
