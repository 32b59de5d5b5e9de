// Package previousrelease names the release before this tree and builds
// its vipctl from the clone's git history (hack/build-previous.sh), for
// the version-skew tests (test/e2e TestSkew*) and the cluster lab's
// upgrade from the previous release.
package previousrelease

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vipctl/vipctl/hack/releases"
)

// Fallback is the previous release while hack/releases.txt does not exist
// yet: v0.1.0, the last commit of main that landed before the file
// VERSION (its tree has none). Used only when the file is missing: a file
// that exists is the record, and one without a release is an error.
var Fallback = releases.Release{Version: "v0.1.0", Commit: "20cad92aaf07969c4eeb20f1c6b9be9f80c16091"}

// Find is the newest release hack/releases.txt (under root, the
// repository's root) records: the one this tree follows.
func Find(root string) (releases.Release, error) {
	if _, err := os.Stat(filepath.Join(root, releases.ReleasesFile)); errors.Is(err, os.ErrNotExist) {
		return Fallback, nil
	}
	records, err := releases.ReadReleases(root)
	if err != nil {
		return releases.Release{}, err
	}
	if len(records) == 0 {
		return releases.Release{}, fmt.Errorf("%s records no release", releases.ReleasesFile)
	}
	return records[len(records)-1], nil
}

// Dir is where hack/build-previous.sh keeps a release: its source (a git
// worktree of its commit) in Dir/src, its vipctl in Dir/vipctl.
func Dir(root string, r releases.Release) string {
	return filepath.Join(root, "bin", "previous", r.Commit)
}

var (
	mu    sync.Mutex
	built = map[releases.Release]string{}
)

// Binary builds the release's vipctl (cached by commit: seconds when it
// was built before) and returns its path. One build per process and
// release, however many tests ask.
func Binary(root string, r releases.Release) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[r]; ok {
		return bin, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "build-previous.sh"), r.Version, r.Commit)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-previous.sh %s %s: %w\n%s", r.Version, r.Commit, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := lines[len(lines)-1]
	if bin != filepath.Join(Dir(root, r), "vipctl") {
		return "", fmt.Errorf("hack/build-previous.sh printed %q, not the binary's path", bin)
	}
	built[r] = bin
	return bin, nil
}
