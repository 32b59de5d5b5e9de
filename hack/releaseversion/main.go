// Command releaseversion names the build of a vipctl tree from the
// repository's own files, so a fresh clone knows its version without git
// tags:
//
//   - VERSION (the repository's root) holds the release this tree is or
//     follows: v0.1.0. The release commit is the one that sets it.
//   - hack/releases.txt records each release and its commit, one line
//     each ("v0.1.0 <40 hex digits>", oldest first), written in the
//     commit after the release (a commit cannot name its own hash).
//
// The version of the tree (what `make build` stamps and the image is
// tagged with) is VERSION at the release commit itself, and for any other
// commit VERSION-N-gHASH, N commits after it, "-dirty" with changes git
// has not committed: the names `git describe --tags --dirty` gives when the
// tags are there. v0.0.0 in VERSION means nothing is released yet: every
// commit is then named v0.0.0-N-gHASH.
//
// Git tags are optional, but when present they must agree (-check): a
// release tag names a recorded release's commit, or the release this tree
// sets and has not yet recorded.
//
//	releaseversion            print the tree's version
//	releaseversion -check     exit 1 naming each tag or record that disagrees
//	releaseversion -commit V  print the commit recorded for release V
//	releaseversion -judge V   exit 1 saying why V is not a release's version
//	                          (pkg/version.IsRelease: what render's image
//	                          warning and vipctl version follow)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/vipctl/vipctl/hack/releases"
	"github.com/vipctl/vipctl/pkg/version"
)

// The files this command reads, from the repository's root.
const (
	VersionFile  = releases.VersionFile
	ReleasesFile = releases.ReleasesFile
	unreleased   = releases.Unreleased
)

func main() {
	dir := flag.String("C", ".", "the repository's root")
	check := flag.Bool("check", false, "check that the git tags agree with "+VersionFile+" and "+ReleasesFile)
	commit := flag.String("commit", "", "print the commit recorded for this release")
	judge := flag.String("judge", "", "exit 1 unless this is a release's version")
	flag.Parse()
	if *judge != "" {
		if !version.IsRelease(*judge) {
			fmt.Fprintf(os.Stderr, "%s is not a release version: the release commit is the one that sets the file %s (v1.2.3, or v1.2.3-rc.1, -alpha.N, -beta.N for a candidate; docs/image.md)\n", *judge, VersionFile)
			os.Exit(1)
		}
		return
	}
	if err := run(*dir, *check, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "releaseversion:", err)
		os.Exit(1)
	}
}

func run(dir string, check bool, commit string) error {
	switch {
	case check:
		problems, err := Check(dir)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("the git tags disagree with %s and %s:\n  %s", VersionFile, ReleasesFile, strings.Join(problems, "\n  "))
		}
		return nil
	case commit != "":
		records, err := releases.ReadReleases(dir)
		if err != nil {
			return err
		}
		for _, r := range records {
			if r.Version == commit {
				fmt.Println(r.Commit)
				return nil
			}
		}
		return fmt.Errorf("%s: no release %s recorded", ReleasesFile, commit)
	}
	v, err := Version(dir)
	if err != nil {
		return err
	}
	fmt.Println(v)
	return nil
}

// repo runs git in one repository.
type repo string

func (r repo) git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", string(r)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// releaseCommit is the commit that made the tree's VERSION what it is:
// the recorded one, or, until it is recorded, the last commit that
// changed VERSION. A shallow clone may lack it.
func (r repo) releaseCommit(v string, records []releases.Release) (string, error) {
	for _, rec := range records {
		if rec.Version == v {
			return rec.Commit, nil
		}
	}
	if shallow, _ := r.git("rev-parse", "--is-shallow-repository"); shallow == "true" {
		// The oldest commit of a shallow clone seems to add every file.
		return "", fmt.Errorf("%s %s is not in %s and this clone is shallow: fetch the history (git fetch --unshallow)", VersionFile, v, ReleasesFile)
	}
	c, err := r.git("log", "-1", "--format=%H", "--", VersionFile)
	if err == nil && c == "" {
		err = fmt.Errorf("no commit has %s", VersionFile)
	}
	return c, err
}

// Version is the tree's version (the package comment says how it is
// named). Outside a git checkout (a source archive) it is VERSION-source:
// nothing tells which commit it is, so it is not named a release.
func Version(dir string) (string, error) {
	v, err := releases.ReadVersionFile(dir)
	if err != nil {
		return "", err
	}
	r := repo(dir)
	if _, err := r.git("rev-parse", "--is-inside-work-tree"); err != nil {
		return v + "-source", nil
	}
	records, err := releases.ReadReleases(dir)
	if err != nil {
		return "", err
	}
	base, err := r.releaseCommit(v, records)
	if err != nil {
		return "", err
	}
	head, err := r.git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := r.git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	dirty := ""
	if status != "" {
		dirty = "-dirty"
	}
	if head == base && v != unreleased {
		return v + dirty, nil
	}
	if _, err := r.git("merge-base", "--is-ancestor", base, head); err != nil {
		return "", fmt.Errorf("the release commit of %s, %s, is not an ancestor of HEAD: %w", v, base, err)
	}
	n, err := r.git("rev-list", "--count", base+".."+head)
	if err != nil {
		return "", err
	}
	short, err := r.git("rev-parse", "--short", "HEAD")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-g%s%s", v, n, short, dirty), nil
}

// Check lists every way the git tags disagree with VERSION and
// ReleasesFile, and every record whose commit is not a release commit of
// its version (one whose VERSION says it). A clone without tags agrees.
func Check(dir string) ([]string, error) {
	v, err := releases.ReadVersionFile(dir)
	if err != nil {
		return nil, err
	}
	records, err := releases.ReadReleases(dir)
	if err != nil {
		return nil, err
	}
	r := repo(dir)
	var problems []string
	recorded := map[string]string{}
	for _, rec := range records {
		recorded[rec.Version] = rec.Commit
		if _, err := r.git("cat-file", "-e", rec.Commit+"^{commit}"); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s's commit %s is not in this clone", ReleasesFile, rec.Version, rec.Commit))
			continue
		}
		if got, _ := r.git("show", rec.Commit+":"+VersionFile); got != rec.Version {
			problems = append(problems, fmt.Sprintf("%s: %s's commit %s has %s %q", ReleasesFile, rec.Version, rec.Commit, VersionFile, got))
		}
	}
	tags, err := r.git("tag", "--list")
	if err != nil {
		return nil, err
	}
	for _, tag := range strings.Fields(tags) {
		if !version.IsRelease(tag) {
			continue // not a release's tag (nightly, a lab's marker)
		}
		commit, err := r.git("rev-parse", tag+"^{commit}")
		if err != nil {
			return nil, err
		}
		want, ok := recorded[tag]
		if !ok && tag == v {
			// Released in this tree, not yet recorded: the commit that
			// set VERSION.
			if want, err = r.releaseCommit(v, records); err != nil {
				return nil, err
			}
			ok = true
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("tag %s: no such release in %s (%s is %s)", tag, ReleasesFile, VersionFile, v))
		case commit != want:
			problems = append(problems, fmt.Sprintf("tag %s is on %s, but release %s is commit %s", tag, commit, tag, want))
		}
	}
	return problems, nil
}
