package doccheck

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/semver"

	"github.com/vipctl/vipctl/hack/releases"
	"github.com/vipctl/vipctl/test/fixture"
)

func TestBlocks(t *testing.T) {
	t.Parallel()
	md := "# Guide\n\n<!-- doctest -->\n```sh\nvipctl validate -f cluster.yaml\n```\n\n" +
		"<!-- doctest: file cluster.yaml -->\n\n```yaml\nkind: ClusterVIPs\n```\n" +
		"<!-- doctest: skip, needs oc -->\nsome text in between\n```sh\noc apply -f out/\n```\n" +
		"<!--doctest: cluster-->\n~~~bash\nvipctl status\n~~~\n" +
		"```\nplain\n```\n"
	got, err := Blocks([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 4, Lang: "sh", Text: "vipctl validate -f cluster.yaml\n", Marked: true},
		{Line: 10, Lang: "yaml", Text: "kind: ClusterVIPs\n", Marked: true, Mark: File, Arg: "cluster.yaml"},
		// Text between the mark and the block: the mark is not this block's.
		{Line: 15, Lang: "sh", Text: "oc apply -f out/\n"},
		{Line: 19, Lang: "bash", Text: "vipctl status\n", Marked: true, Mark: Cluster},
		{Line: 22, Text: "plain\n"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blocks:\n%+v\nwant\n%+v", got, want)
	}
}

func TestBadMarks(t *testing.T) {
	t.Parallel()
	for mark, want := range map[string]string{
		"<!-- doctest: skip -->":          "line 1: doctest: skip wants a reason",
		"<!-- doctest: file -->":          "line 1: doctest: file wants a file name",
		"<!-- doctest: file a/b.yaml -->": "line 1: doctest: file wants a file name in the working directory",
		"<!-- doctest: run -->":           `line 1: doctest: unknown directive "run"`,
		"<!-- doctest: cluster now -->":   "line 1: doctest: cluster takes nothing after it",
	} {
		if _, err := Blocks([]byte(mark + "\n```sh\ntrue\n```\n")); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", mark, err, want)
		}
	}
	if _, err := Blocks([]byte("```sh\ntrue\n")); err == nil || err.Error() != "line 1: the block never ends" {
		t.Errorf("unterminated block: %v", err)
	}
}

// TestDocsCiteFilesThatExist: every Markdown file README.md and docs/
// (the benchmark journal under docs/benchmarks/ too) cite exists in the
// repository. docs/operations.md cited a design.md that does not.
func TestDocsCiteFilesThatExist(t *testing.T) {
	t.Parallel()
	root := fixture.Repo("")
	paths := append([]string{"README.md"}, docsMarkdown(t, root, "")...)
	for _, p := range paths {
		missing, err := MissingCitations(root, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range missing {
			t.Errorf("%s cites %s, which the repository does not have", p, m)
		}
	}
}

// TestVersionMentions: what counts as naming a version of vipctl, and
// the release each mention is or follows; other projects' versions are
// not vipctl's.
func TestVersionMentions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, line string
		want       []Mention
	}{
		{"image reference", "keepalived: registry.example.test/vipctl/vipctl:v0.5.0", []Mention{{1, "v0.5.0", "v0.5.0"}}},
		{"the recipe's variable", "VERSION=v0.5.0   # the release's version", []Mention{{1, "v0.5.0", "v0.5.0"}}},
		{"vipctl and its version, end of a sentence", "Upgrading from vipctl v0.4.0.", []Mention{{1, "v0.4.0", "v0.4.0"}}},
		{"a development build", "`git describe` says `v0.5.0-3-ge6f8dbd`, quay.io/vipctl/vipctl:v0.5.0-3-ge6f8dbd-dirty", []Mention{{1, "v0.5.0-3-ge6f8dbd-dirty", "v0.5.0"}}},
		{"a candidate", "vipctl v0.2.0-rc.1 is a candidate", []Mention{{1, "v0.2.0-rc.1", "v0.2.0-rc.1"}}},
		{"tag-pinned URL", "https://github.com/vipctl/vipctl/blob/v0.1.0/docs/alerts.md#vipctlvipnotheld", []Mention{{1, "v0.1.0", "v0.1.0"}}},
		{"changelog heading and compare link", "## [v0.2.0] - 2027-01-01\n[v0.2.0]: https://github.com/vipctl/vipctl/compare/v0.1.0...v0.2.0", []Mention{{1, "v0.2.0", "v0.2.0"}, {2, "v0.1.0", "v0.1.0"}, {2, "v0.2.0", "v0.2.0"}}},
		{"release directory and tag", "git tag -a v0.3.0 -m x; ls bin/release/v0.3.0/", []Mention{{1, "v0.3.0", "v0.3.0"}, {1, "v0.3.0", "v0.3.0"}}},
		{"other projects", "kube-vip v0.9.2 and MetalLB v0.15.3; github.com/kube-vip/kube-vip@v0.9.2", nil},
		{"placeholders", "quay.io/vipctl/vipctl:<version>, VERSION=$(cat VERSION), vipctl vX.Y.Z", nil},
	} {
		if got := VersionMentions([]byte(tc.line)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestDocVersions: the docs name one version of vipctl, the current
// release (the file VERSION), or a release hack/releases.txt records (a
// changelog's older entries, an upgrade's starting point); a development
// build's name counts as the release it follows. A doc that names
// another (v0.5.0, which was never released) fails, line by line.
func TestDocVersions(t *testing.T) {
	t.Parallel()
	root := fixture.Repo("")
	current, err := releases.ReadVersionFile(root)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := releases.ReadReleases(root)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{current: true}
	for _, r := range recorded {
		known[r.Version] = true
	}
	paths := append([]string{"README.md", "CHANGELOG.md"}, docsMarkdown(t, root, "")...)
	named := 0
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range VersionMentions(data) {
			named++
			if !known[m.Release] {
				t.Errorf("%s:%d names vipctl %s, which is neither the current release %s (the file VERSION) nor one %s records", p, m.Line, m.Version, current, releases.ReleasesFile)
			}
		}
	}
	if named == 0 {
		t.Errorf("no doc names a version of vipctl: %s's version is unknown to VersionMentions", current)
	}
}

// TestPeerMentions: what counts as naming a release of kube-vip or
// MetalLB, and which peer each is.
func TestPeerMentions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, md string
		want     []PeerMention
	}{
		{"name and release", "kube-vip v1.2.3 and MetalLB v0.16.1.", []PeerMention{{1, "kube-vip", "v1.2.3"}, {1, "MetalLB", "v0.16.1"}}},
		{"possessive, any case", "kube-vip's v0.9.2, METALLB v0.15.3", []PeerMention{{1, "kube-vip", "v0.9.2"}, {1, "MetalLB", "v0.15.3"}}},
		{"in parentheses", "kube-vip (v0.9.2) took 5.7 s", []PeerMention{{1, "kube-vip", "v0.9.2"}}},
		{"across a line break", "as in\nMetalLB\nv0.15.3 and kube-vip\nv1.0.0", []PeerMention{{2, "MetalLB", "v0.15.3"}, {3, "kube-vip", "v1.0.0"}}},
		{"module path and benchmark line", "github.com/kube-vip/kube-vip@v0.9.2\npeers peer=metallb version=v0.16.1@791dfcc63ced case=node-loss", []PeerMention{{1, "kube-vip", "v0.9.2"}, {2, "MetalLB", "v0.16.1"}}},
		{"a candidate", "kube-vip v1.3.0-rc.1", []PeerMention{{1, "kube-vip", "v1.3.0-rc.1"}}},
		{"not a peer's release", "vipctl v0.1.0, GoBGP v4.8.0, FRR 8.4, kube-vip-global, MetalLB's rule (v0.16.1, frr-k8s v0.0.25", nil},
	} {
		if got := PeerMentions([]byte(tc.md)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// journalDir holds the dated benchmark journal: each run as it was
// recorded, at the releases pinned then.
var journalDir = filepath.Join("docs", "benchmarks")

// TestDocsNamePinnedPeers: README.md and the docs name kube-vip and
// MetalLB at no release older than the one hack/peers.env pins, the one
// the benchmarks measure now. The dated journal under docs/benchmarks/
// and CHANGELOG.md are history and may name older ones: a sentence about
// an older release belongs there, dated, not in a guide.
func TestDocsNamePinnedPeers(t *testing.T) {
	t.Parallel()
	root := fixture.Repo("")
	pinned, err := PinnedPeers(root)
	if err != nil {
		t.Fatal(err)
	}
	paths := append([]string{"README.md"}, docsMarkdown(t, root, journalDir)...)
	named := map[string]int{}
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range PeerMentions(data) {
			named[m.Peer]++
			if semver.Compare(m.Version, pinned[m.Peer]) < 0 {
				t.Errorf("%s:%d names %s %s, older than %s, the release %s pins: name the current release, or move the sentence into the dated journal under %s/", p, m.Line, m.Peer, m.Version, pinned[m.Peer], PeersEnv, journalDir)
			}
		}
	}
	for _, peer := range slices.Sorted(maps.Keys(pinned)) {
		if named[peer] == 0 {
			t.Errorf("no doc names %s at a release (%s pins %s): PeerMentions finds none", peer, PeersEnv, pinned[peer])
		}
	}
}

// docsMarkdown lists the Markdown files under docs/, its subdirectories
// included but skip (from the repository's root; "" skips none), as
// paths from the root.
func docsMarkdown(t *testing.T, root, skip string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() && rel == skip {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(rel, ".md") {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}
