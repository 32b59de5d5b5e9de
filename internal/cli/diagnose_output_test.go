package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiagnoseOutputRefused: `vipctl diagnose -o` refuses, naming
// --output and before it reads a kubeconfig or gathers anything, a bundle
// path it could not write (issue 47: `-o .` was "exists; pass --force",
// and with --force failed after the whole bundle was gathered).
func TestDiagnoseOutputRefused(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("gone", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"a directory", []string{"-o", root, "--force"}, "error: --output: ROOT is a directory: name the bundle's file, e.g. ROOT/vipctl-diagnose.tar.gz\n"},
		{"a directory, no --force", []string{"-o", root}, "error: --output: ROOT is a directory: name the bundle's file, e.g. ROOT/vipctl-diagnose.tar.gz\n"},
		{"no directory to hold it", []string{"-o", root + "/no/b.tar.gz"}, "error: --output: ROOT/no/b.tar.gz: no directory ROOT/no to write it in\n"},
		{"a symbolic link to nothing", []string{"-o", root + "/link", "--force"}, "error: --output: ROOT/link is a symbolic link to gone, which does not exist\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No kubeconfig anywhere: reaching for the cluster would fail
			// with another message.
			args := append([]string{"diagnose", "--kubeconfig", filepath.Join(root, "no-kubeconfig")}, tc.args...)
			r := run(t, args...)
			if want := strings.ReplaceAll(tc.stderr, "ROOT", root); r.code != 1 || r.stderr != want {
				t.Errorf("exit %d, stderr %q,\nwant exit 1, stderr %q", r.code, r.stderr, want)
			}
		})
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("written: %v", entries)
	}
}
