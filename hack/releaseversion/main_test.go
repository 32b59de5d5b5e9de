package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a repository of the test's own, with the files the version
// is read from.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *gitRepo {
	t.Helper()
	g := &gitRepo{t: t, dir: t.TempDir()}
	g.git("init", "-q", "-b", "main")
	return g
}

func (g *gitRepo) git(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=vipctl test", "-c", "user.email=test@example.test", "-c", "tag.gpgSign=false", "-c", "commit.gpgSign=false"}, args...)...)
	cmd.Dir = g.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (g *gitRepo) write(name, text string) {
	g.t.Helper()
	p := filepath.Join(g.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// commit writes the files (name, text, name, text, ...) and commits them;
// it returns the commit's hash.
func (g *gitRepo) commit(files ...string) string {
	g.t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		g.write(files[i], files[i+1])
		g.git("add", files[i])
	}
	g.git("commit", "-q", "--allow-empty", "-m", "change")
	return g.git("rev-parse", "HEAD")
}

func (g *gitRepo) short(commit string) string { return g.git("rev-parse", "--short", commit) }

// history is the life of a repository around its first release: work
// before it (VERSION v0.0.0), the release commit (VERSION v0.1.0), work
// after it, the commit that records it, and work after that.
type history struct {
	*gitRepo
	before, release, after, recorded, later string
}

func newHistory(t *testing.T) history {
	t.Helper()
	g := newRepo(t)
	h := history{gitRepo: g}
	h.before = g.commit(VersionFile, "v0.0.0\n", "main.go", "package main\n")
	h.release = g.commit(VersionFile, "v0.1.0\n")
	h.after = g.commit("main.go", "package main // after\n")
	h.recorded = g.commit(ReleasesFile, "# version commit\nv0.1.0 "+h.release+"\n")
	h.later = g.commit("main.go", "package main // later\n")
	return h
}

// TestVersion: the version of every commit around a release, with and
// without tags; a fresh clone without any tag names each commit as the
// repository with its tags does (git describe --tags).
func TestVersion(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	want := map[string]string{
		"before":   "v0.0.0-0-g" + h.short(h.before),
		"release":  "v0.1.0",
		"after":    "v0.1.0-1-g" + h.short(h.after),
		"recorded": "v0.1.0-2-g" + h.short(h.recorded),
		"later":    "v0.1.0-3-g" + h.short(h.later),
	}
	commits := map[string]string{"before": h.before, "release": h.release, "after": h.after, "recorded": h.recorded, "later": h.later}

	h.git("tag", "-a", "-m", "vipctl v0.1.0", "v0.1.0", h.release)
	clone := filepath.Join(t.TempDir(), "clone")
	h.git("clone", "-q", "--no-tags", h.dir, clone)
	if tags := (&gitRepo{t: t, dir: clone}).git("tag"); tags != "" {
		t.Fatalf("the clone has tags %q", tags)
	}
	for name, commit := range commits {
		for where, dir := range map[string]string{"with tags": h.dir, "fresh clone without tags": clone} {
			g := &gitRepo{t: t, dir: dir}
			g.git("checkout", "-q", commit)
			got, err := Version(dir)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, where, err)
			}
			if got != want[name] {
				t.Errorf("%s, %s: version %q, want %q", name, where, got, want[name])
			}
			if name != "before" && where == "with tags" {
				if d := g.git("describe", "--tags", "--dirty"); d != got {
					t.Errorf("%s: version %q, git describe --tags says %q", name, got, d)
				}
			}
		}
	}
}

func TestVersionOtherTrees(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T) string
		want    string
		wantErr string
	}{
		{"changes not committed", func(t *testing.T) string {
			h := newHistory(t)
			h.git("checkout", "-q", h.release)
			h.write("main.go", "package main // edited\n")
			return h.dir
		}, "v0.1.0-dirty", ""},
		{"a new file alone is no change", func(t *testing.T) string {
			h := newHistory(t)
			h.git("checkout", "-q", h.release)
			h.write("new.go", "package main\n")
			return h.dir
		}, "v0.1.0", ""},
		{"a source archive", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, VersionFile), []byte("v0.1.0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "v0.1.0-source", ""},
		{"VERSION not a release's", func(t *testing.T) string {
			g := newRepo(t)
			g.commit(VersionFile, "0.1\n")
			return g.dir
		}, "", `VERSION: "0.1" is not a release's version (vMAJOR.MINOR.PATCH, or -rc.N, -alpha.N, -beta.N for a candidate)`},
		{"a shallow clone of an unrecorded release", func(t *testing.T) string {
			h := newHistory(t)
			clone := filepath.Join(t.TempDir(), "clone")
			h.git("clone", "-q", "--depth=1", "--no-local", "--branch", "main", h.dir, clone)
			// The record's commit reaches back past the shallow boundary:
			// drop it, as at a release commit.
			if err := os.Remove(filepath.Join(clone, ReleasesFile)); err != nil {
				t.Fatal(err)
			}
			return clone
		}, "", "VERSION v0.1.0 is not in hack/releases.txt and this clone is shallow: fetch the history (git fetch --unshallow)"},
		{"a bad record", func(t *testing.T) string {
			h := newHistory(t)
			h.write(ReleasesFile, "v0.1.0 "+h.release+"\nv0.2.0 1234567\nv0.1.0\n")
			return h.dir
		}, "", "hack/releases.txt:2: v0.2.0: \"1234567\" is not a full commit hash (40 hex digits)\nhack/releases.txt:3: want VERSION COMMIT, got \"v0.1.0\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Version(tc.setup(t))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Version: %q, %v; want the error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Version: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestCheck: tags are optional, but a release tag must be on the commit
// the files say the release is.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup tags and edits the history; it returns the commit to
		// check out.
		setup func(h history) string
		want  []string
	}{
		{"no tags", func(h history) string { return h.later }, nil},
		{"the release tagged, recorded", func(h history) string {
			h.git("tag", "-a", "-m", "v0.1.0", "v0.1.0", h.release)
			return h.later
		}, nil},
		{"the release tagged at the release commit, not yet recorded", func(h history) string {
			h.git("tag", "v0.1.0", h.release)
			return h.after
		}, nil},
		{"tags that are not releases are not judged", func(h history) string {
			h.git("tag", "nightly", h.after)
			h.git("tag", "v0.1.0-4-gdeadbee", h.after)
			return h.later
		}, nil},
		{"the tag on another commit than the record", func(h history) string {
			h.git("tag", "v0.1.0", h.after)
			return h.later
		}, []string{"tag v0.1.0 is on {after}, but release v0.1.0 is commit {release}"}},
		{"the tag on another commit than the one that set VERSION", func(h history) string {
			h.git("tag", "v0.1.0", h.after)
			return h.after
		}, []string{"tag v0.1.0 is on {after}, but release v0.1.0 is commit {release}"}},
		{"a tag of a release nobody recorded", func(h history) string {
			h.git("tag", "v0.0.9", h.before)
			return h.later
		}, []string{"tag v0.0.9: no such release in hack/releases.txt (VERSION is v0.1.0)"}},
		{"a record of a commit whose VERSION is another", func(h history) string {
			h.commit(ReleasesFile, "v0.1.0 "+h.before+"\n")
			return "HEAD"
		}, []string{"hack/releases.txt: v0.1.0's commit {before} has VERSION \"v0.0.0\""}},
		{"a record of a commit the clone does not have", func(h history) string {
			h.commit(ReleasesFile, "v0.1.0 "+strings.Repeat("ab", 20)+"\n")
			return "HEAD"
		}, []string{"hack/releases.txt: v0.1.0's commit abababababababababababababababababababab is not in this clone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory(t)
			h.git("checkout", "-q", tc.setup(h))
			got, err := Check(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			r := strings.NewReplacer("{before}", h.before, "{after}", h.after, "{release}", h.release)
			var want []string
			for _, w := range tc.want {
				want = append(want, r.Replace(w))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("Check:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
