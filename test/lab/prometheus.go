package lab

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Prometheus is a real Prometheus (Debian's prometheus package, installed
// by hack/install-deps.sh) that a test configures and queries.
type Prometheus struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string
	log *LogBuffer
}

// StartPrometheus runs prometheus with config (prometheus.yml's text) and
// the given files beside it (rule files, token and CA files the config
// names relatively), its data in dir, until the test ends.
func StartPrometheus(t testing.TB, dir, config string, files map[string][]byte) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus missing: run hack/install-deps.sh")
	}
	files["prometheus.yml"] = []byte(config)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := &Prometheus{URL: "http://" + addr}
	p.log = StartProcess(t, exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr))
	if !WaitUntil(30*time.Second, func() bool {
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("prometheus not ready:\n%s", p.log.Tail(30))
	}
	return p
}

// Sample is one series of a query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates an instant PromQL query now.
func (p *Prometheus) Query(t testing.TB, q string) []Sample {
	t.Helper()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []Sample `json:"result"`
		} `json:"data"`
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &out)
	if out.Status != "success" {
		t.Fatalf("query %s: %s", q, out.Error)
	}
	return out.Data.Result
}

// Alert is one active alert: its labels and state (pending, firing).
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts lists the active alerts (pending and firing).
func (p *Prometheus) Alerts(t testing.TB) []Alert {
	t.Helper()
	var out struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	p.get(t, "/api/v1/alerts", &out)
	return out.Data.Alerts
}

// RuleHealth is each loaded rule's name (alert or record) and health.
func (p *Prometheus) RuleHealth(t testing.TB) map[string]string {
	t.Helper()
	var out struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	p.get(t, "/api/v1/rules", &out)
	h := map[string]string{}
	for _, g := range out.Data.Groups {
		for _, r := range g.Rules {
			h[r.Name] = r.Health + r.LastError
		}
	}
	return h
}

func (p *Prometheus) get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(p.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// StartProcess starts cmd in a process group of its own, its output in
// the returned LogBuffer, and ends it with the test: SIGTERM to the group,
// SIGKILL after ten seconds; on failure the test log gets its tail.
func StartProcess(t testing.TB, cmd *exec.Cmd) *LogBuffer {
	t.Helper()
	log := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("--- %s log:\n%s", filepath.Base(cmd.Path), log.Tail(30))
		}
	})
	return log
}

// Target is one active scrape target.
type Target struct {
	ScrapePool string `json:"scrapePool"`
	Health     string `json:"health"`
	LastError  string `json:"lastError"`
}

// TargetList lists the active scrape targets.
func (p *Prometheus) TargetList(t testing.TB) []Target {
	t.Helper()
	var out struct {
		Data struct {
			ActiveTargets []Target `json:"activeTargets"`
		} `json:"data"`
	}
	p.get(t, "/api/v1/targets", &out)
	return out.Data.ActiveTargets
}

// Targets are the scrape targets' health by job ("up", "down": error).
func (p *Prometheus) Targets(t testing.TB) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, tg := range p.TargetList(t) {
		h[tg.ScrapePool] = tg.Health
		if tg.LastError != "" {
			h[tg.ScrapePool] += fmt.Sprintf(" (%s)", tg.LastError)
		}
	}
	return h
}
