package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/version"
	"github.com/vipctl/vipctl/test/golden"
)

// TestRenderImageWarningGolden: render says on stderr when the pods would name
// the image of a development build (test binaries say "devel"), which no
// registry has, and says nothing when spec.images names the user's mirror
// or when vipctl is a release. Not parallel: one case stamps a release
// version into the process.
func TestRenderImageWarningGolden(t *testing.T) {
	example, err := os.ReadFile(repo("examples/compact-ipv4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Two of the three set: the warning names the field left to default.
	mirrored := filepath.Join(t.TempDir(), "mirrored.yaml")
	images := "\nspec:\n  images:\n    keepalived: registry.example.test/vipctl/vipctl:v0.5.0\n    haproxy: registry.example.test/vipctl/vipctl:v0.5.0\n"
	if err := os.WriteFile(mirrored, []byte(strings.Replace(string(example), "\nspec:\n", images, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	mirroredAll := filepath.Join(t.TempDir(), "mirrored-all.yaml")
	images += "    vipctl: registry.example.test/vipctl/vipctl:v0.5.0\n"
	if err := os.WriteFile(mirroredAll, []byte(strings.Replace(string(example), "\nspec:\n", images, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, version string
	}{
		{"render-devel", repo("examples/compact-ipv4.yaml"), ""},
		{"render-devel-one-default", mirrored, ""},
		{"render-devel-mirrored", mirroredAll, ""},
		{"render-release", repo("examples/compact-ipv4.yaml"), "v0.5.0"},
		// git describe of a commit after a tag is no release.
		{"render-after-tag", repo("examples/compact-ipv4.yaml"), "v0.5.0-3-ge6f8dbd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.version != "" {
				old := version.Version
				version.Version = tc.version
				t.Cleanup(func() { version.Version = old })
			}
			out := filepath.Join(t.TempDir(), "out")
			r := run(t, "render", "-f", tc.file, "--out-dir", out)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := strings.ReplaceAll(fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr), out, "OUT")
			golden.Assert(t, tc.name, []byte(got))
		})
	}
}
