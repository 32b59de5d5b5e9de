package e2e

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/kubeletlab"
)

// TestReleaseDevelopmentBuild runs `make release DEV=1 ARCHES=amd64` on
// this tree (arm64's image takes emulation; hack/imagecheck and the unit
// tests of hack/ cover what differs): a directory with exactly the
// binary, its image archive, the archive of the image index over it, the
// SBOM and SHA256SUMS, which make release-verify accepts;
// the binary is stamped with the version its image is tagged with, and
// renders that image into the static pods (warning that it is a
// development build's); the docs' mirror recipe runs as written against
// the directory (its skopeo copy into a local OCI layout instead of a
// registry) and gives the archive's manifest. The archive comes from the
// cache make image filled (make test builds it first), so this costs a
// link and a copy.
func TestReleaseDevelopmentBuild(t *testing.T) {
	bin := kubeletlab.BinDir(t)
	for _, f := range []string{"image-rootfs.tar", "vipctl-image.tar"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("make release reuses bin/%s: run make image (make test does): %v", f, err)
		}
	}
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Fatal("the docs' mirror recipe needs skopeo: run hack/install-deps.sh (make test does)")
	}
	dir := filepath.Join(t.TempDir(), "release")
	stdout, stderr, err := fixture.MakeRelease(t, fixture.Repo(""), "DEV=1", "ARCHES=amd64", "RELEASE_DIR="+dir)
	if err != nil {
		t.Fatalf("make release DEV=1: %v\n%s%s", err, stdout, stderr)
	}
	verify := exec.Command("make", "--no-print-directory", "-s", "release-verify", "RELEASE_DIR="+dir)
	verify.Dir = fixture.Repo("")
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("make release-verify: %v\n%s", err, out)
	}
	t.Log(stdout)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"SHA256SUMS", "vipctl-image-linux-amd64.tar", "vipctl-image.tar", "vipctl-linux-amd64", "vipctl.spdx.json"}; !slices.Equal(names, want) {
		t.Fatalf("release holds %v, want %v", names, want)
	}

	var v struct {
		Version string `json:"version"`
		Release bool   `json:"release"`
		Image   string `json:"image"`
	}
	vipctl := filepath.Join(dir, "vipctl-linux-amd64")
	if err := json.Unmarshal(runIn(t, dir, vipctl, "version", "-o", "json"), &v); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "vipctl-image.tar")
	entry := archiveIndexEntry(t, archive)
	tag := entry.Annotations["org.opencontainers.image.ref.name"]
	if v.Release || v.Image != entry.Annotations["io.containerd.image.name"] || !strings.HasSuffix(v.Image, ":"+tag) {
		t.Errorf("the binary says version %q (release %v), image %q; the archive is %q tagged %q", v.Version, v.Release, v.Image, entry.Annotations["io.containerd.image.name"], tag)
	}

	// The release's vipctl renders its own image into the static pods and
	// warns that no registry has it.
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(vipctl, "render", "-f", fixture.Repo("examples/compact-ipv4.yaml"), "--out-dir", out)
	var renderErr strings.Builder
	cmd.Stderr = &renderErr
	if err := cmd.Run(); err != nil {
		t.Fatalf("render: %v\n%s", err, renderErr.String())
	}
	if want := "warning: spec.images.keepalived, spec.images.haproxy and spec.images.vipctl name " + v.Image + ", the image of this development build"; !strings.HasPrefix(renderErr.String(), want) {
		t.Errorf("render's stderr:\n%s\nwant it to start %q", renderErr.String(), want)
	}
	mc, err := os.ReadFile(filepath.Join(out, "machineconfigs", "50-vipctl-master.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := kubeletlab.MachineConfigFiles(mc)
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, f := range files {
		if !strings.HasPrefix(f.Path, onnode.StaticPodDir+"/") {
			continue
		}
		pods++
		var p corev1.Pod
		if err := yaml.Unmarshal(f.Data, &p); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if c.Image != v.Image {
				t.Errorf("%s: container %s runs %q, the release's image is %q", f.Path, c.Name, c.Image, v.Image)
			}
		}
	}
	if pods != 2 {
		t.Errorf("the master MachineConfig carries %d static pods, want keepalived's and haproxy's", pods)
	}

	// The docs' recipe, word for word, in the release directory; only the
	// registry is a local OCI layout and the login a no-op.
	recipe := docsMirrorRecipe(t)
	layout := filepath.Join(t.TempDir(), "registry")
	script := `skopeo() {
  case $1 in
    login) return 0 ;;
    copy)
      shift
      local ref=${!#}
      ref=${ref#docker://}
      mkdir -p "$LAYOUT/${ref%:*}"
      command skopeo copy "${@:1:$#-1}" "oci:$LAYOUT/$ref" ;;
    *) echo "the recipe runs skopeo $1" >&2; return 1 ;;
  esac
}
set -euo pipefail
` + recipe
	sh := exec.Command("bash", "-c", script)
	sh.Dir = dir
	sh.Env = append(os.Environ(), "LAYOUT="+layout)
	if got, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the docs' recipe failed in the release directory: %v\n%s\nrecipe:\n%s", err, got, recipe)
	}
	// registry.example.test/vipctl/vipctl:VERSION as a layout directory and
	// its tag: the image index is the archive's, byte for byte.
	pushed := filepath.Join(layout, "registry.example.test", "vipctl", "vipctl")
	copied := layoutIndexEntry(t, pushed)
	if copied.Digest != entry.Digest {
		t.Errorf("the mirrored image's manifest is %s, the archive's %s", copied.Digest, entry.Digest)
	}
}

type ociDescriptor struct {
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// archiveIndexEntry is the one image an OCI archive's index names.
func archiveIndexEntry(t testing.TB, archive string) ociDescriptor {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no index.json: %v", archive, err)
		}
		if h.Name == "index.json" {
			return oneIndexEntry(t, archive, tr)
		}
	}
}

// layoutIndexEntry is the one image of an OCI layout directory, checked
// against the blob its digest names.
func layoutIndexEntry(t testing.TB, layout string) ociDescriptor {
	t.Helper()
	f, err := os.Open(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	d := oneIndexEntry(t, layout, f)
	blob, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(blob); "sha256:"+hex.EncodeToString(sum[:]) != d.Digest {
		t.Errorf("%s: the manifest blob does not match its digest %s", layout, d.Digest)
	}
	return d
}

func oneIndexEntry(t testing.TB, where string, r io.Reader) ociDescriptor {
	t.Helper()
	var idx struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := json.NewDecoder(r).Decode(&idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v (%d manifests)", where, err, len(idx.Manifests))
	}
	return idx.Manifests[0]
}

var shellBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// docsMirrorRecipe is docs/image.md's mirror recipe (pkg/manifests
// TestImageDocs checks it is install.md's too, and what it pushes).
func docsMirrorRecipe(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(fixture.Repo("docs/image.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range shellBlock.FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(m[1], "skopeo copy") {
			return m[1]
		}
	}
	t.Fatal("docs/image.md has no mirror recipe (a ```sh block with skopeo copy)")
	return ""
}

func runIn(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}
