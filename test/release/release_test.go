// Package release tests make release's refusals (hack/release.sh) in
// copies of the sources committed to repositories of their own, so the
// commits and tags are the test's. What a release holds is tested in
// test/e2e (TestReleaseDevelopmentBuild), which needs make image.
package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestReleaseRefusals: make release builds nothing from a tree git has
// not committed, from a commit after the release commit, with a VERSION
// that is not the tree's, or when a git tag disagrees with the file
// VERSION; each refusal says why and leaves no directory.
func TestReleaseRefusals(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	fixture.CopySources(t, src)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=vipctl test", "-c", "user.email=test@example.test", "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false"}, args...)...)
		cmd.Dir = src
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The copy's history is the test's: the records of this repository's
	// releases name commits it does not have.
	if err := os.Remove(filepath.Join(src, "hack", "releases.txt")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "vipctl")
	// The release commit sets VERSION.
	write("VERSION", "v1.2.3\n")
	git("commit", "-qam", "vipctl v1.2.3")
	release := git("rev-parse", "HEAD")
	out := filepath.Join(t.TempDir(), "release")

	for _, tc := range []struct {
		name  string
		setup func()
		vars  []string
		want  string
	}{
		{"uncommitted", func() {
			write("extra.txt", "new\n")
		}, nil, "the tree has changes git has not committed (git status): a release is built from a commit"},
		{"another version", func() {
			if err := os.Remove(filepath.Join(src, "extra.txt")); err != nil {
				t.Fatal(err)
			}
		}, []string{"VERSION=v1.2.4"}, "VERSION=v1.2.4, but this commit is v1.2.3 (the file VERSION and hack/releases.txt)"},
		{"a tag on another commit", func() {
			git("tag", "v1.2.3", "HEAD~1")
		}, nil, "releaseversion: the git tags disagree with VERSION and hack/releases.txt:\n  tag v1.2.3 is on " + git("rev-parse", "HEAD~1") + ", but release v1.2.3 is commit " + release},
		// Judged by the binary it built: the rule render's warning follows.
		{"a commit after the release", func() {
			git("tag", "-d", "v1.2.3")
			git("commit", "-q", "--allow-empty", "-m", "after")
		}, nil, "v1.2.3-1-g{short} is not a release version: the release commit is the one that sets the file VERSION (v1.2.3, or v1.2.3-rc.1, -alpha.N, -beta.N for a candidate; docs/image.md)"},
	} {
		tc.setup()
		want := strings.ReplaceAll(tc.want, "{short}", git("rev-parse", "--short", "HEAD"))
		_, stderr, err := fixture.MakeRelease(t, src, append(tc.vars, "RELEASE_DIR="+out)...)
		if err == nil || !strings.Contains(stderr, "release: refused:\n  "+want+"\n") {
			t.Errorf("%s: err %v, stderr:\n%s\nwant a refusal saying %q", tc.name, err, stderr, want)
		}
		if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
			t.Errorf("%s: the refused release left %v", tc.name, entries)
		}
	}
}
