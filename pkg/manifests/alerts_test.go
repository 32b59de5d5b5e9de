package manifests_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/version"
	"github.com/vipctl/vipctl/test/fixture"
)

// promtoolTests is promtool's unit test file for the alerts.
const promtoolTests = "testdata/alerts.promtool.yaml"

// TestAlertsPromtool: the rendered PrometheusRule's groups pass
// Prometheus's own `promtool check rules` and the cases of
// testdata/alerts.promtool.yaml (`promtool test rules`), and every alert
// has a case in which it fires.
func TestAlertsPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool missing: run hack/install-deps.sh")
	}
	rule := manifests.PrometheusRule(fixture.Example(t, "compact-ipv4.yaml"))
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	cases, err := os.ReadFile(promtoolTests)
	if err != nil {
		t.Fatal(err)
	}
	// The cases name the runbooks of whichever release renders them
	// (RunbookBase, from the file VERSION).
	cases = bytes.ReplaceAll(cases, []byte("https://github.com/vipctl/vipctl/blob/RELEASE/docs/alerts.md#"), []byte(manifests.RunbookBase()))
	dir := t.TempDir()
	for name, data := range map[string][]byte{"rules.yaml": rules, "tests.yaml": cases} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "tests.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(cases, &file); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			}
		}
	}
	for _, a := range manifests.Alerts() {
		if !fires[a.Name] {
			t.Errorf("%s has no case in %s in which it fires", a.Name, promtoolTests)
		}
	}
}

// TestAlertsUseExportedMetrics: every series an alert reads is one the
// sidecar or the allocator exports, or Prometheus's own up (a renamed
// metric would leave its alert silent forever).
func TestAlertsUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics()
	exported["up"] = true
	for _, a := range manifests.Alerts() {
		for _, err := range checkQuery(a.Expr, exported) {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
}

// TestAlertsDocumented: docs/alerts.md has a runbook section per alert,
// headed by its name (the anchor of its runbook_url), that states its
// severity and its `for:`.
func TestAlertsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	rule := manifests.PrometheusRule(fixture.Example(t, "compact-ipv4.yaml"))
	for _, r := range rule.Spec.Groups[0].Rules {
		_, section, found := strings.Cut(doc, "\n## "+r.Alert+"\n")
		if !found {
			t.Errorf("docs/alerts.md has no section \"## %s\"", r.Alert)
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ")
		want := "Severity: " + r.Labels["severity"] + ", for " + string(*r.For)
		if !strings.Contains(section, want) {
			t.Errorf("docs/alerts.md, %s: no %q", r.Alert, want)
		}
		for _, part := range []string{"Meaning", "Confirm", "Fix"} {
			if !strings.Contains(section, "**"+part+"**") {
				t.Errorf("docs/alerts.md, %s: no **%s**", r.Alert, part)
			}
		}
	}
}

// TestRunbookURLsNameTheRelease: each alert's runbook_url is its section
// of docs/alerts.md as the release this vipctl is or follows has it (the
// file VERSION), a URL pinned to that release's tag: never main, whose
// runbooks may since describe other alerts.
func TestRunbookURLsNameTheRelease(t *testing.T) {
	rule := manifests.PrometheusRule(fixture.Example(t, "compact-ipv4.yaml"))
	for _, r := range rule.Spec.Groups[0].Rules {
		want := "https://github.com/vipctl/vipctl/blob/" + version.Release() + "/docs/alerts.md#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
	}
}
