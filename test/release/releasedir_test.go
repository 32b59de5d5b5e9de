package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestReleaseDirRefused: make release replaces RELEASE_DIR as a whole, so
// before anything is built it refuses a directory it must not replace:
// the repository or one that holds it (the swap moved it aside and
// deleted it), /, a file, a link to nothing, a directory a release did
// not write (issue 47). What was there stays.
func TestReleaseDirRefused(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "src")
	fixture.CopySources(t, src)
	git := exec.Command("sh", "-c", "git init -q && git add -A && git -c user.name=t -c user.email=t@example.test -c commit.gpgSign=false commit -qm vipctl")
	git.Dir = src
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	mustWrite := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(root, "notes", "todo.txt"))
	mustWrite(filepath.Join(root, "file"))
	// A release's directory with a file its SHA256SUMS does not name.
	mustWrite(filepath.Join(root, "old", "vipctl-linux-amd64"))
	mustWrite(filepath.Join(root, "old", "SHA256SUMS"))
	if err := os.Symlink("gone", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{".", "RELEASE_DIR .: is or holds the repository (ROOT/src), which the release would replace as a whole; name a directory of its own"},
		{"..", "RELEASE_DIR ..: is or holds the repository (ROOT/src), which the release would replace as a whole; name a directory of its own"},
		{root, "RELEASE_DIR ROOT: is or holds the repository (ROOT/src), which the release would replace as a whole; name a directory of its own"},
		{"/", "RELEASE_DIR /: the root directory; name a directory of the release's own"},
		{filepath.Join(root, "notes"), "RELEASE_DIR ROOT/notes: not empty and not a release (a file SHA256SUMS does not name); refusing to replace it"},
		{filepath.Join(root, "old"), "RELEASE_DIR ROOT/old: not empty and not a release (a file SHA256SUMS does not name); refusing to replace it"},
		{filepath.Join(root, "file"), "RELEASE_DIR ROOT/file: exists and is not a directory (or names nothing)"},
		{filepath.Join(root, "link"), "RELEASE_DIR ROOT/link: exists and is not a directory (or names nothing)"},
	} {
		before := listing(t, root)
		_, stderr, err := fixture.MakeRelease(t, src, "DEV=1", "VERSION=v0.0.0-test", "ARCHES=amd64", "RELEASE_DIR="+tc.dir)
		want := "release: refused:\n  " + strings.ReplaceAll(tc.want, "ROOT", root) + "\n"
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("RELEASE_DIR=%s: err %v, stderr:\n%s\nwant %q", tc.dir, err, stderr, want)
		}
		if after := listing(t, root); after != before {
			t.Errorf("RELEASE_DIR=%s: %s changed:\n%s\nwas\n%s", tc.dir, root, after, before)
		}
	}
}

// listing names every entry under dir but src's own (its build may cache).
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "src" && filepath.Dir(p) == dir {
			return filepath.SkipDir
		}
		b.WriteString(p + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
