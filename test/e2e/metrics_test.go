package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// serviceAccountToken creates namespace ns (if need be), the
// ServiceAccount ns/name and returns a token for it.
func serviceAccountToken(t testing.TB, admin kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// scrape GETs url with token (none when empty) and returns the status and
// body.
func scrape(t testing.TB, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// rbacOnly keeps the RBAC objects of objs: the test apiserver has no
// prometheus-operator CRDs for the ServiceMonitors.
func rbacOnly(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			out = append(out, o)
		}
	}
	return out
}

// startVipctl runs bin/vipctl with args until the test ends, its output
// in a LogBuffer.
func startVipctl(t *testing.T, args ...string) *lab.LogBuffer {
	t.Helper()
	return lab.StartProcess(t, exec.Command(requireVipctl(t), args...))
}

// TestMetricsEndpointsAuthorizeScrapers: the sidecar's and the allocator's
// /metrics for the cluster's Prometheus, the real commands against the
// real apiserver with their own identities (the node's client
// certificate; the allocator's ServiceAccount with its rendered RBAC).
// Each refuses a scrape without a token (401) and one whose
// ServiceAccount the RBAC does not allow (403), also the Prometheus's own
// before manifests/monitoring.yaml is applied, and answers it once that
// RBAC is. The sidecar serves the certificate it is given (the kubelet's,
// on a node) and a client verifying it with its CA gets through; the
// allocator, without its service-CA Secret, serves a self-signed one. The
// probes stay plain: the sidecar's on localhost, the allocator's without
// /metrics.
func TestMetricsEndpointsAuthorizeScrapers(t *testing.T) {
	netlab.Require(t)
	cfgYAML := clusterYAML("fast", "unicast", allocPools)
	env := startAllocEnv(t, cfgYAML)
	c, err := v1alpha1.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	prom := c.Spec.PrometheusServiceAccount()
	promToken := serviceAccountToken(t, env.admin, prom.Namespace, prom.Name)
	otherToken := serviceAccountToken(t, env.admin, metav1.NamespaceDefault, "curious")
	dir := t.TempDir()

	// The allocator, as its Deployment runs it.
	allocKubeconfig := filepath.Join(dir, "allocator.kubeconfig")
	testapiserver.WriteKubeconfig(t, env.api.TokenConfig(env.token), allocKubeconfig)
	allocProbes := fmt.Sprintf("127.0.0.1:%d", freeLocalPort(t))
	allocMetrics := fmt.Sprintf("127.0.0.1:%d", freeLocalPort(t))
	allocLog := startVipctl(t, "allocator", "--kubeconfig", allocKubeconfig, "--id", "allocator-0", "--namespace", onnode.Namespace,
		"--listen", allocProbes, "--metrics-listen", allocMetrics,
		"--metrics-cert", filepath.Join(dir, "absent", "tls.crt"), "--metrics-key", filepath.Join(dir, "absent", "tls.key"))

	// The sidecar, with the node's client certificate and, for a serving
	// certificate, one from a CA the scraper trusts, in one file as the
	// kubelet's kubelet-server-current.pem.
	const node = "metrics-0"
	lb := netlab.New(t)
	judge := lb.AddHost("judge", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24"}})
	root := filepath.Join(dir, "node")
	for _, d := range []string{onnode.RunDir, onnode.KeepalivedDir, onnode.HaproxyDir, onnode.StateDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeKubeconfig := filepath.Join(dir, "node.kubeconfig")
	testapiserver.WriteKubeconfig(t, env.api.NodeConfig(t, node), nodeKubeconfig)
	ca := testapiserver.NewCA(t, "vipctl-lab-serving-ca")
	servingPEM := filepath.Join(dir, "kubelet-server-current.pem")
	ca.IssueServing(t, servingPEM, "127.0.0.1")
	sidecarProbes := fmt.Sprintf("127.0.0.1:%d", freeLocalPort(t))
	sidecarMetrics := fmt.Sprintf("127.0.0.1:%d", freeLocalPort(t))
	startVipctl(t, "runtimecfg", "--config", cfgPath, "--bootstrap-nodes", filepath.Join(dir, "none.yaml"), "--node-name", node,
		"--kubeconfig", nodeKubeconfig, "--root", root, "--netns", judge.NS,
		"--listen", sidecarProbes, "--metrics-listen", sidecarMetrics, "--metrics-cert", servingPEM, "--metrics-key", servingPEM)

	verifying := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	skipping := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // the allocator's certificate is self-signed here, as on a cluster without the service CA
	plain := &http.Client{Timeout: 5 * time.Second}
	endpoints := []struct {
		name, url, metric string
		client            *http.Client
	}{
		{"sidecar", "https://" + sidecarMetrics + "/metrics", "vipctl_runtimecfg_renders_total", verifying},
		{"allocator", "https://" + allocMetrics + "/metrics", "vipctl_allocator_leader", skipping},
	}
	for _, e := range endpoints {
		var code int
		var body string
		if !lab.WaitUntil(30*time.Second, func() bool { code, body = scrape(t, e.client, e.url, ""); return code != 0 }) {
			t.Fatalf("%s: %s never answered: %s", e.name, e.url, body)
		}
		if code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %q, want 401", e.name, code, body)
		}
		if code, body = scrape(t, e.client, e.url, "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("%s with a token the apiserver does not know: %d %q, want 401", e.name, code, body)
		}
		for who, tok := range map[string]string{"default/curious": otherToken, prom.Namespace + "/" + prom.Name + " before the RBAC": promToken} {
			if code, body = scrape(t, e.client, e.url, tok); code != http.StatusForbidden || !strings.Contains(body, "may not get /metrics") {
				t.Errorf("%s, ServiceAccount %s: %d %q, want 403 naming /metrics", e.name, who, code, body)
			}
		}
	}
	if code, body := scrape(t, plain, "https://"+sidecarMetrics+"/metrics", promToken); code != 0 || !strings.Contains(body, "certificate") {
		t.Errorf("sidecar: a client that does not trust its CA got %d %q, want a failed handshake", code, body)
	}

	lab.ApplyObjects(t, env.api.AdminConfig(), rbacOnly(manifests.Monitoring(c)))
	for _, e := range endpoints {
		var code int
		var body string
		// A denial is cached for ten seconds.
		if !lab.WaitUntil(30*time.Second, func() bool { code, body = scrape(t, e.client, e.url, promToken); return code == http.StatusOK }) {
			t.Fatalf("%s: the Prometheus's ServiceAccount with the rendered RBAC: %d %q, want 200", e.name, code, body)
		}
		if !strings.Contains(body, e.metric) {
			t.Errorf("%s: /metrics lacks %s:\n%.2000s", e.name, e.metric, body)
		}
		if code, body = scrape(t, e.client, e.url, otherToken); code != http.StatusForbidden {
			t.Errorf("%s: default/curious after the RBAC: %d %q, want still 403", e.name, code, body)
		}
	}

	// A real Prometheus scrapes both as the rendered ServiceMonitors
	// have it do: https with its ServiceAccount's token, the sidecar's
	// certificate verified with its CA (the allocator's self-signed one
	// not), and evaluates the rendered alerts.
	rules, err := yaml.Marshal(map[string]any{"groups": manifests.PrometheusRule(c).Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	promCfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
- job_name: %s
  scheme: https
  bearer_token_file: token
  tls_config: {ca_file: ca.crt}
  static_configs: [{targets: [%q], labels: {node: %s}}]
- job_name: %s
  scheme: https
  bearer_token_file: token
  tls_config: {insecure_skip_verify: true}
  static_configs: [{targets: [%q]}]
`, manifests.NodeMetricsName, sidecarMetrics, node, manifests.AllocatorMetricsName, allocMetrics)
	server := lab.StartPrometheus(t, t.TempDir(), promCfg, map[string][]byte{"rules.yaml": rules, "token": []byte(promToken), "ca.crt": ca.CertPEM()})
	var targets map[string]string
	if !lab.WaitUntil(30*time.Second, func() bool {
		targets = server.Targets(t)
		return targets[manifests.NodeMetricsName] == "up" && targets[manifests.AllocatorMetricsName] == "up"
	}) {
		t.Errorf("Prometheus's targets: %v, want both up", targets)
	}
	for q, want := range map[string]int{
		`vipctl_runtimecfg_sync_failing{node="` + node + `"}`: 1,
		`vipctl_allocator_leader == 1`:                        1,
		`up == 1`:                                             2,
	} {
		if got := server.Query(t, q); len(got) != want {
			t.Errorf("Prometheus: %s: %v, want %d series", q, got, want)
		}
	}
	var health map[string]string
	if !lab.WaitUntil(30*time.Second, func() bool {
		health = server.RuleHealth(t)
		for _, a := range manifests.Alerts() {
			if health[a.Name] != "ok" {
				return false
			}
		}
		return true
	}) {
		t.Errorf("Prometheus's rule health: %v, want every alert ok", health)
	}

	// The probes: plain, without credentials, as the kubelet asks.
	if code, body := scrape(t, plain, "http://"+sidecarProbes+"/healthz", ""); code != http.StatusOK {
		t.Errorf("sidecar /healthz on localhost: %d %q", code, body)
	}
	if code, body := scrape(t, plain, "http://"+allocProbes+"/healthz", ""); code != http.StatusOK {
		t.Errorf("allocator /healthz: %d %q", code, body)
	}
	if code, _ := scrape(t, plain, "http://"+allocProbes+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("allocator: plain /metrics on the pod network answered %d, want 404 (only the TLS port serves it)", code)
	}
	if !strings.Contains(allocLog.String(), "self-signed") {
		t.Errorf("allocator without its certificate Secret does not say it serves a self-signed certificate:\n%s", allocLog.Tail(20))
	}
}
