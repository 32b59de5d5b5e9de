package kubeletlab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestContainerLogsBetween: only the lines a container logged inside the
// window are given, at most limit of them, under the file they come from;
// a container with none in it is left out.
func TestContainerLogsBetween(t *testing.T) {
	n := &Node{Name: "master-1", dir: t.TempDir()}
	write := func(rel string, lines ...string) {
		p := filepath.Join(n.dir, "root/var/log/pods", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ns_keepalived/runtimecfg/0.log",
		"2026-11-27T16:02:10.000000000Z stderr F before",
		"2026-11-27T16:02:15.100000000Z stderr F first",
		"a line without a stamp",
		"2026-11-27T16:02:16.200000000Z stderr F second",
		"2026-11-27T16:02:17.300000000Z stderr F third",
		"2026-11-27T16:02:30.000000000Z stderr F after")
	write("ns_proxy/kube-proxy/0.log", "2026-11-27T16:01:00.000000000Z stderr F long before")
	from := time.Date(2026, 11, 27, 16, 2, 15, 0, time.UTC)
	got := n.ContainerLogsBetween(from, from.Add(5*time.Second), 2)
	for _, want := range []string{"master-1 /ns_keepalived/runtimecfg/0.log", "F first", "F second", "(1 more)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"before", "third", "after", "without", "kube-proxy"} {
		if strings.Contains(got, not) {
			t.Errorf("%q given, outside the window or the limit:\n%s", not, got)
		}
	}
}
