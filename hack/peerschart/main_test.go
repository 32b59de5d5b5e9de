package main

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestChart draws a chart of known lines and checks that it is
// well-formed SVG with one bar per line, each as long as its median, so
// that a benchmark run of an hour does not end in a broken picture.
func TestChart(t *testing.T) {
	lines := `=== RUN something else
peers vip=api peer=vipctl version=abc settings=profile=default case=node-loss trials=5 median_ms=3300 p95_ms=3400 max_ms=3400 failed_requests=330
peers vip=api peer=kube-vip version=v0.9.2 settings=lease=5s case=node-loss trials=5 median_ms=5800 p95_ms=8800 max_ms=8800 failed_requests=580
peers vip=service peer=metallb version=v0.15.3 settings=l2 case=planned trials=5 median_ms=0 p95_ms=7 max_ms=7 failed_requests=1
peers vip=api peer=kube-vip version=v0.9.2 settings=fast/lease=3s case=node-loss trials=5 median_ms=3600 p95_ms=3700 max_ms=3700 failed_requests=360
peers vip=bgp peer=metallb version=v0.15.3 settings=frr/bfd=300ms case=node-loss trials=5 median_ms=900 p95_ms=950 max_ms=950 failed_requests=20
peers vip=bgp peer=vipctl version=abc settings=bfd=300ms case=node-loss trials=5 median_ms=900 p95_ms=950 max_ms=950 failed_requests=20
peers vip=api peer=kube-vip version=v1.2.3@7ce55caffa27 settings=preserve/lease=3s case=planned trials=3 median_ms=0 p95_ms=0 max_ms=0 failed_requests=0
`
	results, err := parse(strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parse(strings.NewReader("peers vip=api peer=x case=c trials=five")); err == nil {
		t.Error("a line with trials=five parsed")
	}
	path := filepath.Join(t.TempDir(), "peers.svg")
	if err := write(path, "peers <test>", results); err != nil {
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
	want := []string{"205.3", "360.9", "224.0", "1.0", "56.0", "56.0", "1.0"}
	if !slices.Equal(widths, want) {
		t.Errorf("bar widths %v, want %v", widths, want)
	}
	for _, s := range []string{"peers <test>", "3300 / 3400 ms, 330 failed (5 trials)", "kube-vip v0.9.2 (lease 5s)", "kube-vip v0.9.2 fast (lease 3s)",
		"kube-vip v1.2.3 preserve (lease 3s)", "vipctl (BFD 300ms)", "metallb v0.15.3 frr bfd (BFD 300ms)",
		"metallb v0.15.3 (L2)", "vipctl default (1 s adverts)", "Service VIP (ARP) · planned move: longest run of failed requests"} {
		if !slices.Contains(texts, s) {
			t.Errorf("no text %q in %q", s, texts)
		}
	}
}
