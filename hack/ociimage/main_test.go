package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
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
	if err := eachEntry(next, func(h *tar.Header, _ io.Reader) error { names[h.Name] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if !names[blobPath(l.Digest)] {
			t.Errorf("layer %s not in the archive", l.Digest)
		}
	}
	if err := run(options{base: base, rootfs: base, name: "example.test/tool:v3", out: filepath.Join(dir, "bad.tar"), created: created}); err == nil {
		t.Error("-base with -rootfs accepted")
	}
}
