package e2e

import (
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// peerResult is one line of BenchmarkPeers, kept for the chart.
type peerResult struct {
	vip, peer, version, settings, scenario string
	median, p95                            time.Duration
	failed, trials                         int
}

// label names the bar: the peer and, for vipctl, its profile.
func (r peerResult) label() string {
	if p, ok := strings.CutPrefix(r.settings, "profile="); ok {
		p, _, _ = strings.Cut(p, "/")
		return r.peer + " " + p
	}
	return r.peer + " " + r.version
}

// peerColors are the bars' colours by peer and vipctl profile.
var peerColors = map[string]string{
	"vipctl default": "#1f77b4", "vipctl fast": "#6baed6", "kube-vip": "#ff7f0e", "metallb": "#2ca02c",
}

func (r peerResult) color() string {
	if c, ok := peerColors[strings.TrimSuffix(r.label(), " "+r.version)]; ok {
		return c
	}
	return "#7f7f7f"
}

// peerCaseTitles title the chart's groups.
var peerCaseTitles = map[string]string{
	"node-loss":  "node lost: fault → answer from another node",
	"agent-kill": "agent killed (SIGKILL): fault → answer from another node",
	"planned":    "planned move: longest run of failed requests",
}

// writePeersChart draws results as an SVG bar chart: a group per VIP and
// case, a bar per peer and settings whose length is the median outage,
// a whisker to the p95, and the numbers and failed requests beside it.
// It writes to path atomically.
func writePeersChart(path, title string, results []peerResult) error {
	var groups []string
	byGroup := map[string][]peerResult{}
	var top time.Duration
	for _, r := range results {
		g := r.vip + "|" + r.scenario
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], r)
		top = max(top, r.p95)
	}
	// The axis ends on the next whole second above the longest p95.
	axis := (top/time.Second + 1) * time.Second
	const (
		left, barW, rowH, groupGap, headH, width = 150, 560, 18, 34, 60, 960
	)
	height := headH + 30
	for _, g := range groups {
		height += groupGap + rowH*len(byGroup[g])
	}
	x := func(d time.Duration) float64 { return left + barW*float64(d)/float64(axis) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">bar: median outage; whisker: p95; right: median / p95, failed requests over all trials</text>`+"\n")
	// Gridlines every second.
	for s := time.Duration(0); s <= axis; s += time.Second {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(s), headH, x(s), height-30)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%d s</text>`+"\n", x(s), height-14, s/time.Second)
	}
	y := headH
	for _, g := range groups {
		vip, scenario, _ := strings.Cut(g, "|")
		what := map[string]string{"api": "API VIP", "service": "Service VIP"}[vip]
		if what == "" {
			what = vip
		}
		y += groupGap
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s · %s</text>`+"\n", y-8, what, html.EscapeString(peerCaseTitles[scenario]))
		for _, r := range byGroup[g] {
			mid := y + rowH/2
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, mid+4, html.EscapeString(r.label()))
			w := max(x(r.median)-left, 1)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+2, w, rowH-4, r.color())
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x(r.median), mid, x(r.p95), mid)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x(r.p95), mid-4, x(r.p95), mid+4)
			fmt.Fprintf(&b, `<text x="%d" y="%d">%d / %d ms, %d failed (%d trials)</text>`+"\n", left+barW+10, mid+4,
				r.median.Milliseconds(), r.p95.Milliseconds(), r.failed, r.trials)
			y += rowH
		}
	}
	b.WriteString("</svg>\n")

	tmp := path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// TestPeersChart draws a chart of known results and checks that it is
// well-formed SVG with one bar per result, each as long as its median,
// so that a benchmark run of an hour does not end in a broken picture.
func TestPeersChart(t *testing.T) {
	results := []peerResult{
		{vip: "api", peer: "vipctl", version: "abc", settings: "profile=default", scenario: "node-loss", median: 3300 * time.Millisecond, p95: 3400 * time.Millisecond, failed: 330, trials: 5},
		{vip: "api", peer: "kube-vip", version: "v0.9.2", settings: "lease=5s", scenario: "node-loss", median: 5800 * time.Millisecond, p95: 8800 * time.Millisecond, failed: 580, trials: 5},
		{vip: "service", peer: "metallb", version: "v0.15.3", settings: "l2", scenario: "planned", median: 0, p95: 7 * time.Millisecond, failed: 1, trials: 5},
	}
	path := filepath.Join(t.TempDir(), "peers.svg")
	if err := writePeersChart(path, "peers <test>", results); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var widths []string
	var texts []string
	d := xml.NewDecoder(strings.NewReader(string(data)))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, data)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			for _, a := range tok.Attr {
				if tok.Name.Local == "rect" && a.Name.Local == "fill" && a.Value != "white" {
					for _, a := range tok.Attr {
						if a.Name.Local == "width" {
							widths = append(widths, a.Value)
						}
					}
				}
			}
		case xml.CharData:
			texts = append(texts, string(tok))
		}
	}
	// The axis ends at 9 s: 560 px for 9 s.
	want := []string{"205.3", "360.9", "1.0"}
	if !slices.Equal(widths, want) {
		t.Errorf("bar widths %v, want %v", widths, want)
	}
	for _, s := range []string{"peers <test>", "3300 / 3400 ms, 330 failed (5 trials)", "kube-vip v0.9.2", "vipctl default", "Service VIP · planned move: longest run of failed requests"} {
		if !slices.Contains(texts, s) {
			t.Errorf("no text %q in %q", s, texts)
		}
	}
}
