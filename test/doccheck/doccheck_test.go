package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
// cite exists in the repository. docs/operations.md cited a design.md
// that does not.
func TestDocsCiteFilesThatExist(t *testing.T) {
	t.Parallel()
	root := fixture.Repo("")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"README.md"}
	for _, d := range docs {
		paths = append(paths, filepath.Join("docs", filepath.Base(d)))
	}
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
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"README.md", "CHANGELOG.md"}
	for _, d := range docs {
		paths = append(paths, filepath.Join("docs", filepath.Base(d)))
	}
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
