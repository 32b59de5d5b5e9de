// Command peerschart draws BenchmarkPeers' lines (make bench-peers) as an
// SVG bar chart: a group per VIP and case, a bar per peer and settings
// whose length is the median outage, a whisker to the p95, and the
// numbers and failed requests beside it. It reads the lines, and skips
// anything else, from standard input:
//
//	... | grep '^peers ' | go run ./hack/peerschart -o bin/peers.svg -title "..."
//
// A chart drawn from the lines a run printed, or from the lines
// docs/benchmarks.md records, cannot drift from them.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "", "write the SVG here (atomically); standard output if empty")
	title := flag.String("title", "vipctl and its peers (make bench-peers)", "the chart's title")
	flag.Parse()
	results, err := parse(os.Stdin)
	if err == nil && len(results) == 0 {
		err = fmt.Errorf("no peers lines on standard input")
	}
	if err == nil {
		err = write(*out, *title, results)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerschart:", err)
		os.Exit(1)
	}
}

// parse reads the peers lines of r:
//
//	peers vip=V peer=P version=X settings=S case=C trials=N median_ms=M p95_ms=Q max_ms=Z failed_requests=F
func parse(r io.Reader) ([]peerResult, error) {
	var results []peerResult
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "peers" {
			continue
		}
		kv := map[string]string{}
		for _, field := range f[1:] {
			k, v, _ := strings.Cut(field, "=")
			kv[k] = v
		}
		var res peerResult
		res.vip, res.peer, res.version, res.settings, res.scenario = kv["vip"], kv["peer"], kv["version"], kv["settings"], kv["case"]
		ints := map[string]*int{"trials": &res.trials, "failed_requests": &res.failed}
		durs := map[string]*time.Duration{"median_ms": &res.median, "p95_ms": &res.p95}
		for k, p := range ints {
			v, err := strconv.Atoi(kv[k])
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", n, k, err)
			}
			*p = v
		}
		for k, p := range durs {
			v, err := strconv.Atoi(kv[k])
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", n, k, err)
			}
			*p = time.Duration(v) * time.Millisecond
		}
		if res.vip == "" || res.peer == "" || res.scenario == "" {
			return nil, fmt.Errorf("line %d: no vip, peer or case", n)
		}
		results = append(results, res)
	}
	return results, sc.Err()
}

// vipctlVariant names vipctl's settings on its bar: the first of them,
// the profile by its name ("fast").
func vipctlVariant(settings string) string {
	first, _, _ := strings.Cut(settings, "/")
	return strings.TrimPrefix(first, "profile=")
}

// peerResult is one line of BenchmarkPeers.
type peerResult struct {
	vip, peer, version, settings, scenario string
	median, p95                            time.Duration
	failed, trials                         int
}

// label names the bar: vipctl with its settings' variant, a peer with
// its release and its variant (peerVariant).
func (r peerResult) label() string {
	if r.peer == "vipctl" {
		return r.peer + " " + vipctlVariant(r.settings)
	}
	// The release, not the commit hack/build-peers.sh stamps after it
	// (v1.2.3@7ce55caffa27): the lines keep that.
	version, _, _ := strings.Cut(r.version, "@")
	if v := r.peerVariant(); v != "" {
		return r.peer + " " + version + " " + v
	}
	return r.peer + " " + version
}

// caption is the bar's text: its label and, in brackets, the settings
// that make it (docs/benchmarks.md: a bar says what it measured).
func (r peerResult) caption() string {
	s := settingsText(r.settings)
	switch {
	case s == "":
		return r.label()
	case r.peer == "vipctl" && strings.Contains(vipctlVariant(r.settings), "="):
		// Its label's variant is a setting ("vipctl bfd=300ms"): said
		// once, in words.
		return "vipctl (" + s + ")"
	}
	return r.label() + " (" + s + ")"
}

// settingWords are the words a line's settings are written in, as a
// reader says them; the variant words the label already has (fast,
// preserve, tuned, frr) are left out.
var settingWords = map[string]string{
	"profile=default": "1 s adverts", "profile=fast": "100 ms adverts",
	"announce=keepalived": "keepalived announces", "announce=sidecar": "the sidecar announces",
	"svc_election": "per-Service election", "l2": "L2", "native": "native BGP", "memberlist": "memberlist",
	"fast": "", "preserve": "", "tuned": "", "frr": "",
}

// settingKeys name a setting's key in the caption.
var settingKeys = map[string]string{"arp": "ARP every", "bfd": "BFD", "hold": "BGP hold time"}

// settingsText writes a line's settings ("fast/lease=3s/arp=500ms") as
// the caption says them ("lease 3s, ARP every 500ms").
func settingsText(settings string) string {
	var out []string
	for _, s := range strings.Split(settings, "/") {
		if w, ok := settingWords[s]; ok {
			if w != "" {
				out = append(out, w)
			}
			continue
		}
		if k, v, ok := strings.Cut(s, "="); ok {
			if name, ok := settingKeys[k]; ok {
				k = name
			}
			out = append(out, k+" "+v)
			continue
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// peerVariant is what sets a peer's bar apart from its defaults: "fast"
// where its settings are its quickest ones (they start with "fast/"),
// "preserve" (kube-vip keeping the address on losing the lease) and
// "tuned" (MetalLB's memberlist timers) likewise, "bfd" for BGP with
// BFD, "frr" for MetalLB's FRR mode, with "bfd" where BFD is on ("frr
// bfd").
func (r peerResult) peerVariant() string {
	first, rest, _ := strings.Cut(r.settings, "/")
	switch first {
	case "fast", "preserve", "tuned":
		return first
	case "bfd=300ms":
		return "bfd"
	case "frr":
		if strings.HasPrefix(rest, "bfd=") {
			return "frr bfd"
		}
		return "frr"
	}
	return ""
}

// peerColors are the bars' colours by peer and variant (the slower in
// the darker shade).
var peerColors = map[string]string{
	"vipctl default": "#1f77b4", "vipctl hold=3s": "#1f77b4", "vipctl fast": "#6baed6", "vipctl bfd=300ms": "#6baed6",
	"kube-vip": "#ff7f0e", "kube-vip fast": "#fdae6b", "kube-vip preserve": "#fdd0a2", "kube-vip bfd": "#fdae6b",
	"metallb": "#2ca02c", "metallb tuned": "#98df8a", "metallb frr": "#2ca02c", "metallb frr bfd": "#98df8a",
}

func (r peerResult) color() string {
	key := r.peer
	if r.peer == "vipctl" {
		key = r.label()
	} else if v := r.peerVariant(); v != "" {
		key += " " + v
	}
	if c, ok := peerColors[key]; ok {
		return c
	}
	if c, ok := peerColors[r.peer]; ok {
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

// write draws results to path (atomically), or to standard output.
func write(path, title string, results []peerResult) error {
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
		left, barW, rowH, groupGap, headH, width = 600, 560, 18, 34, 60, 1410
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
		what := map[string]string{"api": "API VIP", "service": "Service VIP (ARP)", "bgp": "Service VIP (BGP)"}[vip]
		if what == "" {
			what = vip
		}
		y += groupGap
		caseTitle := peerCaseTitles[scenario]
		if vip == "bgp" {
			caseTitle = "node lost: fault → last failed connection through the router (ECMP)"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s · %s</text>`+"\n", y-8, what, html.EscapeString(caseTitle))
		for _, r := range byGroup[g] {
			mid := y + rowH/2
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, mid+4, html.EscapeString(r.caption()))
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

	if path == "" {
		_, err := os.Stdout.WriteString(b.String())
		return err
	}
	tmp := path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
