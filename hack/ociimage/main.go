// Command ociimage writes a one-layer OCI image layout into a tar (an "OCI
// archive", which `ctr images import` and `skopeo copy oci-archive:` read)
// from a root filesystem tar plus added files; with -base, the added files
// are one layer over another such archive's image (its layers copied as
// they are, its configuration kept). With -index, it writes no image but
// one archive holding several (one per architecture, each this command's
// output) under an OCI image index, the multi-architecture image a
// registry serves under one tag.
//
// It exists so that `make image` needs no umoci, skopeo or registry: the
// layout is three JSON documents and a gzipped tar, and writing them here
// keeps the output a pure function of the inputs (fixed timestamps, sorted
// JSON, a gzip header without name or time), so equal inputs give an equal
// archive and an equal image digest.
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vipctl/hack/internal/ociarchive"
)

const (
	mediaManifest = ociarchive.MediaManifest
	mediaIndex    = ociarchive.MediaIndex
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = ociarchive.MediaLayer
	// refNameAnnotation is the tag skopeo and the OCI layout spec read;
	// containerNameAnnotation the full name `ctr images import` gives the
	// image.
	refNameAnnotation       = "org.opencontainers.image.ref.name"
	containerNameAnnotation = "io.containerd.image.name"
	defaultPath             = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// The layout's documents, as ociarchive reads them.
type (
	descriptor = ociarchive.Descriptor
	platform   = ociarchive.Platform
	manifest   = ociarchive.Manifest
	index      = ociarchive.Index
)

type imageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       runConfig `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
	History      []history `json:"history"`
}

type runConfig struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// addFlag collects -add SRC:DST pairs.
type addFlag []string

func (a *addFlag) String() string     { return strings.Join(*a, ",") }
func (a *addFlag) Set(v string) error { *a = append(*a, v); return nil }

type options struct {
	rootfs     string
	base       string
	arch       string
	images     addFlag
	adds       addFlag
	name       string
	out        string
	entrypoint string
	user       string
	created    time.Time
}

func main() {
	var o options
	flag.StringVar(&o.rootfs, "rootfs", "", "root filesystem tar (mmdebstrap's output); empty for an image of only the added files")
	flag.StringVar(&o.base, "base", "", "an OCI archive (this command's output) whose image the added files are a layer over; excludes -rootfs")
	flag.StringVar(&o.arch, "arch", "amd64", "the image's architecture (GOARCH's names: amd64, arm64); with -base, the base's")
	flag.Var(&o.images, "index", "an OCI archive of one image (this command's output), one per architecture (repeatable): write them under one image index instead of an image")
	flag.Var(&o.adds, "add", "SRC:DST, a file added to the layer as root-owned, mode of SRC (repeatable)")
	flag.StringVar(&o.name, "name", "", "image name with tag, e.g. quay.io/vipctl/vipctl:v0.1.0")
	flag.StringVar(&o.out, "o", "", "output OCI archive")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "the image's entrypoint (one path), if any")
	flag.StringVar(&o.user, "user", "", "the image's user, UID[:GID] (numeric: a kubelet verifies runAsNonRoot only against a number)")
	flag.Parse()
	o.created = sourceDate()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

// sourceDate is SOURCE_DATE_EPOCH (the reproducible-builds convention), or
// the epoch: never the wall clock.
func sourceDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

func run(o options) error {
	if o.name == "" || o.out == "" {
		return errors.New("-name and -o are required")
	}
	if o.base != "" && o.rootfs != "" {
		return errors.New("-base and -rootfs exclude each other: the base image has its root filesystem")
	}
	tag := o.name[strings.LastIndex(o.name, ":")+1:]
	if !strings.Contains(o.name, ":") || strings.Contains(tag, "/") {
		return fmt.Errorf("-name %q has no tag", o.name)
	}
	if len(o.images) > 0 {
		if o.base != "" || o.rootfs != "" || len(o.adds) > 0 {
			return errors.New("-index writes an index of images built already: no -base, -rootfs or -add")
		}
		return writeIndex(o, tag)
	}
	if o.arch == "" {
		o.arch = "amd64"
	}
	layerFile, err := os.CreateTemp(filepath.Dir(o.out), ".layer-*")
	if err != nil {
		return err
	}
	// The layer is copied into the archive below; the temporary file is
	// scratch either way.
	defer func() { _ = os.Remove(layerFile.Name()) }()
	defer func() { _ = layerFile.Close() }()
	diffID, layer, err := writeLayer(layerFile, o)
	if err != nil {
		return err
	}
	created := o.created.Format(time.RFC3339)
	cfg := imageConfig{
		Created: created, Architecture: o.arch, OS: "linux",
		Config: runConfig{Env: []string{defaultPath}},
		RootFS: rootFS{Type: "layers"},
	}
	var baseLayers []descriptor
	if o.base != "" {
		if cfg, baseLayers, err = readBase(o.base); err != nil {
			return err
		}
		cfg.Created = created
	}
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	cfg.History = append(cfg.History, history{Created: created, CreatedBy: "vipctl hack/ociimage"})
	if o.user != "" {
		cfg.Config.User = o.user
	}
	if o.entrypoint != "" {
		cfg.Config.Entrypoint = []string{o.entrypoint}
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDesc := blobDescriptor(mediaConfig, cfgJSON)
	man, err := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: append(baseLayers, layer)})
	if err != nil {
		return err
	}
	manDesc := blobDescriptor(mediaManifest, man)
	manDesc.Annotations = map[string]string{refNameAnnotation: tag, containerNameAnnotation: o.name}
	manDesc.Platform = &platform{Architecture: cfg.Architecture, OS: cfg.OS}
	out, tw, err := createLayout(o, manDesc, namedBlob{ociarchive.BlobPath(manDesc.Digest), man}, namedBlob{ociarchive.BlobPath(cfgDesc.Digest), cfgJSON})
	if err != nil {
		return err
	}
	if _, err := layerFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: ociarchive.BlobPath(layer.Digest), Mode: 0o444, Size: layer.Size, ModTime: o.created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layerFile); err != nil {
		return fmt.Errorf("%s: layer: %w", o.out, err)
	}
	if o.base != "" {
		if err := copyBlobs(tw, o.base, baseLayers); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

type namedBlob struct {
	name string
	data []byte
}

// createLayout starts the archive o.out: the layout's marker, index.json
// naming top (the image or the image index) and the blobs given.
func createLayout(o options, top descriptor, blobs ...namedBlob) (*os.File, *tar.Writer, error) {
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{top}})
	if err != nil {
		return nil, nil, err
	}
	out, err := os.Create(o.out)
	if err != nil {
		return nil, nil, err
	}
	tw := tar.NewWriter(out)
	for _, f := range append([]namedBlob{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", idx}}, blobs...) {
		if err := writeBytes(tw, f.name, f.data, o.created); err != nil {
			_ = out.Close()
			return nil, nil, fmt.Errorf("%s: %w", o.out, err)
		}
	}
	return out, tw, nil
}

// writeIndex writes the archive o.out with the images of o.images (one
// each, of different platforms) under one image index named o.name: their
// manifests, configurations and layers copied as they are, so each
// image's digest is the one of its own archive.
func writeIndex(o options, tag string) error {
	var manifests []descriptor
	seen := map[platform]string{}
	for _, archive := range o.images {
		var idx index
		if err := ociarchive.ReadJSON(archive, "index.json", &idx); err != nil {
			return err
		}
		if len(idx.Manifests) != 1 || idx.Manifests[0].MediaType != mediaManifest || idx.Manifests[0].Platform == nil {
			return fmt.Errorf("%s: want one image with its platform in index.json", archive)
		}
		d := idx.Manifests[0]
		if other, ok := seen[*d.Platform]; ok {
			return fmt.Errorf("%s: a second image for %s/%s (the first: %s)", archive, d.Platform.OS, d.Platform.Architecture, other)
		}
		seen[*d.Platform] = archive
		d.Annotations = nil
		manifests = append(manifests, d)
	}
	data, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests})
	if err != nil {
		return err
	}
	top := blobDescriptor(mediaIndex, data)
	top.Annotations = map[string]string{refNameAnnotation: tag, containerNameAnnotation: o.name}
	out, tw, err := createLayout(o, top, namedBlob{ociarchive.BlobPath(top.Digest), data})
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }() // closed below; this is for the errors
	copied := map[string]bool{}
	for _, archive := range o.images {
		err := ociarchive.EachEntry(archive, func(h *tar.Header, r io.Reader) error {
			if !strings.HasPrefix(h.Name, "blobs/") || copied[h.Name] {
				return nil
			}
			copied[h.Name] = true
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := io.Copy(tw, r)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

// writeLayer copies the root filesystem tar and the added files into one
// gzipped tar on w; it returns the uncompressed digest (the diff ID) and
// the layer's descriptor. gzip's default level: on the 190 MB layer it
// gives an archive 0.7 % larger than level 9 in a quarter of the time
// (9 s against 37 s, docs/benchmarks.md), which every make image pays.
func writeLayer(w io.Writer, o options) (string, descriptor, error) {
	compressed := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(w, compressed)}
	gz, err := gzip.NewWriterLevel(counter, gzip.DefaultCompression)
	if err != nil {
		return "", descriptor{}, err
	}
	uncompressed := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(gz, uncompressed))
	if o.rootfs != "" {
		if err := copyTar(tw, o.rootfs); err != nil {
			return "", descriptor{}, err
		}
	}
	for _, a := range o.adds {
		src, dst, ok := strings.Cut(a, ":")
		if !ok {
			return "", descriptor{}, fmt.Errorf("-add %q: want SRC:DST", a)
		}
		if err := addFile(tw, src, dst, o.created); err != nil {
			return "", descriptor{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", descriptor{}, err
	}
	if err := gz.Close(); err != nil {
		return "", descriptor{}, err
	}
	return digest(uncompressed), descriptor{MediaType: mediaLayer, Digest: digest(compressed), Size: counter.n}, nil
}

// readBase reads an OCI archive's one image: its configuration and its
// layers' descriptors.
func readBase(archive string) (imageConfig, []descriptor, error) {
	var cfg imageConfig
	var idx index
	if err := ociarchive.ReadJSON(archive, "index.json", &idx); err != nil {
		return cfg, nil, err
	}
	if len(idx.Manifests) != 1 {
		return cfg, nil, fmt.Errorf("%s: %d images in index.json, want one", archive, len(idx.Manifests))
	}
	var man manifest
	if err := ociarchive.ReadJSON(archive, ociarchive.BlobPath(idx.Manifests[0].Digest), &man); err != nil {
		return cfg, nil, err
	}
	if err := ociarchive.ReadJSON(archive, ociarchive.BlobPath(man.Config.Digest), &cfg); err != nil {
		return cfg, nil, err
	}
	if len(cfg.RootFS.DiffIDs) != len(man.Layers) {
		return cfg, nil, fmt.Errorf("%s: %d layers but %d diff IDs", archive, len(man.Layers), len(cfg.RootFS.DiffIDs))
	}
	return cfg, man.Layers, nil
}

// copyBlobs copies the archive's blobs of layers into tw, as they are.
func copyBlobs(tw *tar.Writer, archive string, layers []descriptor) error {
	want := map[string]bool{}
	for _, l := range layers {
		want[ociarchive.BlobPath(l.Digest)] = true
	}
	err := ociarchive.EachEntry(archive, func(h *tar.Header, r io.Reader) error {
		if !want[h.Name] {
			return nil
		}
		delete(want, h.Name)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	})
	if err == nil && len(want) > 0 {
		err = fmt.Errorf("%d layer blobs missing", len(want))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	return nil
}

func copyTar(tw *tar.Writer, path string) error {
	err := ociarchive.EachEntry(path, func(h *tar.Header, r io.Reader) error {
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if _, err := io.Copy(tw, r); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func addFile(tw *tar.Writer, src, dst string, mtime time.Time) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	h := &tar.Header{
		Name: "./" + strings.TrimPrefix(dst, "/"), Mode: int64(st.Mode().Perm()), Size: int64(len(data)),
		ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	_, err = tw.Write(data)
	return err
}

func writeBytes(tw *tar.Writer, name string, data []byte, mtime time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func blobDescriptor(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
