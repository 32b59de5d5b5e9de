package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderWarnsWithoutIngressNodeSelector: render of a large node list
// says on stderr, and still renders, when an IngressController has no
// nodeSelector and so every node lists every other as a peer (issue 47:
// 666 MB of configs at 5000 nodes, without a word).
func TestRenderWarnsWithoutIngressNodeSelector(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.yaml")
	writeNodeList(t, nodes, 101)
	for _, tc := range []struct {
		name         string
		infraRouters bool
		// want is the warning's line; "" for none.
		want string
	}{
		{name: "no nodeSelector", want: "warning: spec.ingress[0].nodeSelector is not set: every one of the 101 nodes takes part in IngressController default's VRRP instance and lists all the others as peers; copy the IngressController's spec.nodePlacement.nodeSelector.matchLabels there"},
		{name: "the routers' nodes", infraRouters: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub := t.TempDir()
			file := filepath.Join(sub, "cluster.yaml")
			writeClusterFile(t, file, "2001:db8:1::5", tc.infraRouters)
			r := run(t, "render", "-f", file, "--nodes", nodes, "--out-dir", filepath.Join(sub, "out"))
			// Other warnings (the image, the release) are not this test's.
			var got string
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, "nodeSelector is not set") {
					got = line
				}
			}
			if r.code != 0 || got != tc.want {
				t.Errorf("exit %d, warning %q,\nwant exit 0, warning %q", r.code, got, tc.want)
			}
		})
	}
}
