// Package releases reads the files that name vipctl's releases: VERSION
// (the repository's root: the release the tree is or follows) and
// hack/releases.txt (each release's commit, one line each, "v0.1.0 <40 hex
// digits>", oldest first). hack/releaseversion names builds from them,
// the doc test holds the docs to them, and an upgrade test finds the
// previous release's commit in them.
package releases

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vipctl/vipctl/pkg/version"
)

// The files, from the repository's root.
const (
	VersionFile  = "VERSION"
	ReleasesFile = "hack/releases.txt"
	// Unreleased is what VERSION holds before the first release.
	Unreleased = "v0.0.0"
)

// Release is one line of ReleasesFile.
type Release struct {
	Version, Commit string
}

var fullHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ReadVersionFile is VERSION's one line, which must be a release's
// version (or v0.0.0, nothing released yet).
func ReadVersionFile(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, VersionFile))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(data))
	if !version.IsRelease(v) {
		return "", fmt.Errorf("%s: %q is not a release's version (vMAJOR.MINOR.PATCH, or -rc.N, -alpha.N, -beta.N for a candidate)", VersionFile, v)
	}
	return v, nil
}

// ReadReleases reads ReleasesFile; a missing file records nothing.
// Every problem names its line.
func ReadReleases(dir string) ([]Release, error) {
	data, err := os.ReadFile(filepath.Join(dir, ReleasesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Release
	var problems []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			problems = append(problems, fmt.Sprintf("%s:%d: want VERSION COMMIT, got %q", ReleasesFile, n, line))
		case !version.IsRelease(f[0]) || f[0] == Unreleased:
			problems = append(problems, fmt.Sprintf("%s:%d: %q is not a release's version", ReleasesFile, n, f[0]))
		case !fullHash.MatchString(f[1]):
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %q is not a full commit hash (40 hex digits)", ReleasesFile, n, f[0], f[1]))
		case seen[f[0]]:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is recorded twice", ReleasesFile, n, f[0]))
		default:
			seen[f[0]] = true
			out = append(out, Release{Version: f[0], Commit: f[1]})
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}
