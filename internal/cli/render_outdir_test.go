package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderOutDirRefused: an output directory render cannot replace is
// refused naming --out-dir, before the inputs are read (the cluster file
// here does not exist), exit 1, and nothing is written (issue 47:
// `--out-dir .` ended in "device or resource busy" after the render).
func TestRenderOutDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, root string) (out, wd string)
		stderr string
	}{
		{
			name: "the current directory",
			setup: func(t *testing.T, root string) (string, string) {
				if err := os.Mkdir(filepath.Join(root, "out"), 0o755); err != nil {
					t.Fatal(err)
				}
				return ".", filepath.Join(root, "out")
			},
			stderr: "error: --out-dir: output . is the current directory, which vipctl would replace as a whole: name a directory inside it, e.g. out\n",
		},
		{
			name:   "the root directory",
			setup:  func(_ *testing.T, root string) (string, string) { return "/", root },
			stderr: "error: --out-dir: output / is the root directory: name a directory for vipctl's files alone, e.g. ./out\n",
		},
		{
			name: "a symbolic link to nothing",
			setup: func(t *testing.T, root string) (string, string) {
				if err := os.Symlink("gone", filepath.Join(root, "out")); err != nil {
					t.Fatal(err)
				}
				return "out", root
			},
			stderr: "error: --out-dir: output out is a symbolic link to gone, which does not exist: create that directory or name another\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			out, wd := tc.setup(t, root)
			t.Chdir(wd)
			r := run(t, "render", "-f", filepath.Join(root, "no-such-cluster.yaml"), "--out-dir", out)
			if r.code != 1 || r.stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q,\nwant exit 1, stderr %q", r.code, r.stderr, tc.stderr)
			}
			entries, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != "out" || strings.HasPrefix(e.Name(), ".") {
					t.Errorf("%s written", e.Name())
				}
			}
		})
	}
}
