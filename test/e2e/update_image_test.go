package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/version"
)

// TestUpdateImageWarning: update says on stderr, once and in render's
// words (pinned by internal/cli's TestRenderImageWarningGolden), when the
// config it writes names the image of a development build (this test
// binary says "devel"), and says nothing when spec.images names the
// user's mirror or when vipctl is a release. Against the real apiserver,
// dry runs. Not parallel: one case stamps a release version into the
// process, which the parallel tests' in-process vipctl would read (a
// CI run caught TestUpdateBringsRenderedObjectsInLine rendering the
// release's image): it runs before them, alone.
func TestUpdateImageWarning(t *testing.T) {
	// No monitoring stack: stderr holds the image warning alone, not also
	// the note on prometheus-operator's kinds this apiserver lacks.
	base := strings.Replace(clusterYAML("fast", "unicast", updateBase), "  servicePools:", "  monitoring: {stack: none}\n  servicePools:", 1)
	e := startAllocEnv(t, base)
	kubeconfig, file := updateFiles(t, e.api, base)
	mirrored := strings.Replace(base, "  servicePools:", `  images:
    keepalived: registry.example.test/vipctl/vipctl:v0.5.0
    haproxy: registry.example.test/vipctl/vipctl:v0.5.0
    vipctl: registry.example.test/vipctl/vipctl:v0.5.0
  servicePools:`, 1)
	cfg, err := v1alpha1.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	warning := "warning: " + cfg.UnpublishedImageWarning() + "\n"
	if !strings.Contains(warning, "quay.io/vipctl/vipctl:devel") {
		t.Fatalf("the warning for this test binary's image is %q", warning)
	}
	for _, tc := range []struct {
		name, config, version, stderr string
	}{
		{"devel", base, "", warning},
		{"mirrored", mirrored, "", ""},
		{"release", base, "v0.5.0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.version != "" {
				old := version.Version
				version.Version = tc.version
				t.Cleanup(func() { version.Version = old })
			}
			if err := os.WriteFile(file, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := vipctl(t, "update", "-f", file, "--add-pool", "extra=198.51.100.64/27", "--dry-run", "--kubeconfig", kubeconfig)
			if code != 0 || errOut != tc.stderr {
				t.Errorf("update --dry-run: exit %d, stderr:\n%s\nwant exit 0 and stderr:\n%s", code, errOut, tc.stderr)
			}
		})
	}
}
