package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vipctl/hack/internal/ociarchive"
)

// TestBaseAddsOneLayer: an image written with -base is the base image's
// layers, copied as they are, plus one of the added files: its diff IDs
// extend the base's, its configuration keeps the base's user, and every
// layer the manifest names is in the archive.
func TestBaseAddsOneLayer(t *testing.T) {
	dir := t.TempDir()
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	created := time.Unix(1767225600, 0).UTC()
	base := filepath.Join(dir, "base.tar")
	if err := run(options{adds: addFlag{file("one", "v1") + ":/usr/bin/tool"}, name: "example.test/tool:v1", out: base, user: "65534:65534", created: created}); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(dir, "next.tar")
	if err := run(options{base: base, adds: addFlag{file("two", "v2") + ":/usr/bin/tool"}, name: "example.test/tool:v2", out: next, created: created}); err != nil {
		t.Fatal(err)
	}
	baseCfg, baseLayers, err := readBase(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg, layers, err := readBase(next)
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 || layers[0].Digest != baseLayers[0].Digest {
		t.Errorf("layers %v, want the base's %v and one more", layers, baseLayers)
	}
	if want := append(slices.Clone(baseCfg.RootFS.DiffIDs), cfg.RootFS.DiffIDs[len(cfg.RootFS.DiffIDs)-1]); !slices.Equal(cfg.RootFS.DiffIDs, want) || len(want) != 2 {
		t.Errorf("diff IDs %v, want the base's %v and one more", cfg.RootFS.DiffIDs, baseCfg.RootFS.DiffIDs)
	}
	if cfg.Config.User != "65534:65534" || len(cfg.History) != 2 {
		t.Errorf("config user %q, %d history entries; want the base's user and two", cfg.Config.User, len(cfg.History))
	}
	names := map[string]bool{}
	if err := ociarchive.EachEntry(next, func(h *tar.Header, _ io.Reader) error { names[h.Name] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if !names[ociarchive.BlobPath(l.Digest)] {
			t.Errorf("layer %s not in the archive", l.Digest)
		}
	}
	if err := run(options{base: base, rootfs: base, name: "example.test/tool:v3", out: filepath.Join(dir, "bad.tar"), created: created}); err == nil {
		t.Error("-base with -rootfs accepted")
	}
}

// TestIndex: -index puts images of different architectures under one
// image index, each image's manifest, configuration and layers copied as
// they are (the same digests as in its own archive), the index named by
// the tag; two images of one platform are refused.
func TestIndex(t *testing.T) {
	dir := t.TempDir()
	created := time.Unix(1767225600, 0).UTC()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	archives := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		archives[arch] = filepath.Join(dir, arch+".tar")
		if err := run(options{adds: addFlag{bin + ":/usr/bin/tool"}, arch: arch, name: "example.test/tool:v1", out: archives[arch], created: created}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "index.tar")
	if err := run(options{images: addFlag{archives["amd64"], archives["arm64"]}, name: "example.test/tool:v1", out: out, created: created}); err != nil {
		t.Fatal(err)
	}
	var top index
	if err := ociarchive.ReadJSON(out, "index.json", &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex || top.Manifests[0].Annotations[refNameAnnotation] != "v1" || top.Manifests[0].Annotations[containerNameAnnotation] != "example.test/tool:v1" {
		t.Fatalf("index.json names %+v, want one image index tagged v1", top.Manifests)
	}
	var idx index
	if err := ociarchive.ReadJSON(out, ociarchive.BlobPath(top.Manifests[0].Digest), &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 2 {
		t.Fatalf("the image index lists %d images, want 2", len(idx.Manifests))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		var own index
		if err := ociarchive.ReadJSON(archives[arch], "index.json", &own); err != nil {
			t.Fatal(err)
		}
		got := idx.Manifests[i]
		if got.Digest != own.Manifests[0].Digest || got.Platform == nil || *got.Platform != (platform{Architecture: arch, OS: "linux"}) || got.Annotations != nil {
			t.Errorf("the index's image %d is %+v, want %s's own manifest %s for linux/%s", i, got, archives[arch], own.Manifests[0].Digest, arch)
		}
		cfg, layers, err := readBase(archives[arch])
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch {
			t.Errorf("%s: config's architecture %q", arch, cfg.Architecture)
		}
		var man manifest
		if err := ociarchive.ReadJSON(out, ociarchive.BlobPath(got.Digest), &man); err != nil {
			t.Fatal(err)
		}
		var inIndex imageConfig
		if err := ociarchive.ReadJSON(out, ociarchive.BlobPath(man.Config.Digest), &inIndex); err != nil || inIndex.Architecture != arch {
			t.Errorf("%s: the index's config: %v, architecture %q", arch, err, inIndex.Architecture)
		}
		if len(man.Layers) != len(layers) || man.Layers[0].Digest != layers[0].Digest {
			t.Errorf("%s: layers %v in the index, %v in its archive", arch, man.Layers, layers)
		}
	}
	err := run(options{images: addFlag{archives["amd64"], archives["amd64"]}, name: "example.test/tool:v1", out: filepath.Join(dir, "bad.tar"), created: created})
	if want := archives["amd64"] + ": a second image for linux/amd64 (the first: " + archives["amd64"] + ")"; err == nil || err.Error() != want {
		t.Errorf("two amd64 images: %v, want %q", err, want)
	}
}
