package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/version"
	"github.com/vipctl/vipctl/test/fixture"
)

// imageDocs are the guides that tell users how to mirror the image; each
// carries the one recipe, word for word.
var imageDocs = []string{"docs/image.md", "docs/install.md"}

var (
	shellAssignment = regexp.MustCompile(`^([A-Z_]+)=(\S+)`)
	skopeoCopy      = regexp.MustCompile(`skopeo copy ((?:--\S+ )*)oci-archive:(\S+) docker://(\S+)`)
	shellVariable   = regexp.MustCompile(`\$\{?([A-Z_]+)\}?`)
)

// fencedBlocks returns the bodies of the doc's ```lang blocks.
func fencedBlocks(t *testing.T, doc, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(string(data)) {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// oneBlock is the doc's only ```lang block containing marker.
func oneBlock(t *testing.T, doc, lang, marker string) string {
	t.Helper()
	var found []string
	for _, b := range fencedBlocks(t, doc, lang) {
		if strings.Contains(b, marker) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d ```%s blocks with %q, want the one recipe", doc, len(found), lang, marker)
	}
	return found[0]
}

// TestImageDocs: the mirror recipe in the docs pushes the tag `vipctl
// render` writes into the static pods (and the allocator) by default for
// the release the recipe names, under the same repository path, and the
// spec.images it shows name what it pushed. Every guide carries the same
// recipe. Not parallel: it stamps the recipe's version into the process.
func TestImageDocs(t *testing.T) {
	var recipe, images string
	for _, doc := range imageDocs {
		r, im := oneBlock(t, doc, "sh", "skopeo copy"), oneBlock(t, doc, "yaml", "images:")
		if recipe == "" {
			recipe, images = r, im
			continue
		}
		if r != recipe || im != images {
			t.Errorf("%s's mirror recipe differs from %s's: one recipe, word for word, in every guide\n%s\n%s\nwant\n%s\n%s", doc, imageDocs[0], r, im, recipe, images)
		}
	}

	vars := map[string]string{}
	for line := range strings.Lines(recipe) {
		if m := shellAssignment.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
		}
	}
	m := skopeoCopy.FindStringSubmatch(recipe)
	if m == nil {
		t.Fatalf("no skopeo copy oci-archive:... docker://... in the recipe:\n%s", recipe)
	}
	// The archive is an image index over every architecture's image: a
	// copy without --all would push only the copying machine's.
	if !strings.Contains(" "+m[1], " --all ") {
		t.Errorf("the recipe copies %q without --all: only one architecture's image would reach the registry", m[0])
	}
	dest := shellVariable.ReplaceAllStringFunc(m[3], func(v string) string {
		name := shellVariable.FindStringSubmatch(v)[1]
		val, ok := vars[name]
		if !ok {
			t.Errorf("the recipe uses $%s without setting it", name)
		}
		return val
	})
	i := strings.LastIndex(dest, ":")
	if i < 0 || strings.Contains(dest[i:], "/") {
		t.Fatalf("the recipe pushes %q, which has no tag", dest)
	}
	pushedRepo, pushedTag := dest[:i], dest[i+1:]
	path := func(repo string) string { _, p, _ := strings.Cut(repo, "/"); return p }
	if path(pushedRepo) != path(version.ImageRepository) {
		t.Errorf("the recipe pushes to %s, want the path of %s (%s) under the user's registry", pushedRepo, version.ImageRepository, path(version.ImageRepository))
	}

	// The vipctl of the release the recipe names.
	old := version.Version
	version.Version = vars["VERSION"]
	t.Cleanup(func() { version.Version = old })
	if !version.IsRelease(version.Version) {
		t.Errorf("the recipe's VERSION=%q is not a release's version", version.Version)
	}
	if version.Version != version.Release() {
		t.Errorf("the recipe's VERSION=%s is not the current release, %s (the file VERSION)", version.Version, version.Release())
	}
	// Every image render writes by default, and where.
	rendered := map[string]string{}
	for _, e := range fixture.Examples(t) {
		c := loadExample(t, e)
		for _, p := range []*corev1.Pod{KeepalivedPod(c), HaproxyPod(c)} {
			for _, ctr := range allContainers(p) {
				rendered[ctr.Image] = e + ": static pod " + p.Name + ", container " + ctr.Name
			}
		}
		for _, o := range Allocator(c) {
			if d, ok := o.(*appsv1.Deployment); ok {
				for _, ctr := range d.Spec.Template.Spec.Containers {
					rendered[ctr.Image] = e + ": the allocator's container " + ctr.Name
				}
			}
		}
	}
	want := version.ImageRepository + ":" + pushedTag
	for image, where := range rendered {
		if image != want {
			t.Errorf("%s: render writes %s by default for vipctl %s, the recipe pushes %s", where, image, version.Version, dest)
		}
	}

	var shown struct {
		Spec struct {
			Images v1alpha1.Images `json:"images"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(images), &shown); err != nil {
		t.Fatalf("the docs' spec.images: %v\n%s", err, images)
	}
	for name, ref := range map[string]string{"keepalived": shown.Spec.Images.Keepalived, "haproxy": shown.Spec.Images.Haproxy, "vipctl": shown.Spec.Images.Vipctl} {
		if ref != dest {
			t.Errorf("the docs set spec.images.%s to %q, the recipe pushes %q", name, ref, dest)
		}
	}
}
