// Package ociarchive reads OCI archives (an OCI image layout in a tar, what
// hack/ociimage writes and `skopeo copy oci-archive:` reads): the images
// they hold, one per platform, and the files of each image's layers. The
// release's checks and its SBOM read the image through it.
package ociarchive

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Media types of the documents an archive holds.
const (
	MediaManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaIndex    = "application/vnd.oci.image.index.v1+json"
	MediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Platform is an image's OS and architecture (GOARCH's names).
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Index is index.json, or an image index blob.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an image's manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Image is one image of an archive.
type Image struct {
	Archive string
	// Manifest is the descriptor of the image's manifest: its digest is
	// the image's, the one a registry serves it by.
	Manifest Descriptor
	// Architecture and OS are the image configuration's.
	Architecture, OS string
	Layers           []Descriptor
}

// BlobPath is where a layout keeps the blob of a digest.
func BlobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

// EachEntry calls f with each entry of the tar at path.
func EachEntry(path string, f func(*tar.Header, io.Reader) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }() // read only
	tr := tar.NewReader(file)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(h, tr); err != nil {
			return err
		}
	}
}

// ReadJSON decodes the archive's file name into v.
func ReadJSON(archive, name string, v any) error {
	found := false
	err := EachEntry(archive, func(h *tar.Header, r io.Reader) error {
		if h.Name != name {
			return nil
		}
		found = true
		return json.NewDecoder(r).Decode(v)
	})
	if err == nil && !found {
		err = errors.New("missing")
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", archive, name, err)
	}
	return nil
}

// Top is what the archive's index.json names: one image, or one image
// index of several. Its digest is the one a registry serves the tag by.
func Top(archive string) (Descriptor, error) {
	var top Index
	if err := ReadJSON(archive, "index.json", &top); err != nil {
		return Descriptor{}, err
	}
	if len(top.Manifests) != 1 {
		return Descriptor{}, fmt.Errorf("%s: index.json names %d manifests, want one", archive, len(top.Manifests))
	}
	return top.Manifests[0], nil
}

// Images lists the archive's images: those index.json names, and those of
// the image indexes it names.
func Images(archive string) ([]Image, error) {
	var top Index
	if err := ReadJSON(archive, "index.json", &top); err != nil {
		return nil, err
	}
	var out []Image
	var walk func(ds []Descriptor) error
	walk = func(ds []Descriptor) error {
		for _, d := range ds {
			switch d.MediaType {
			case MediaIndex:
				var idx Index
				if err := ReadJSON(archive, BlobPath(d.Digest), &idx); err != nil {
					return err
				}
				if err := walk(idx.Manifests); err != nil {
					return err
				}
			case MediaManifest:
				var man Manifest
				if err := ReadJSON(archive, BlobPath(d.Digest), &man); err != nil {
					return err
				}
				var cfg struct {
					Architecture string `json:"architecture"`
					OS           string `json:"os"`
				}
				if err := ReadJSON(archive, BlobPath(man.Config.Digest), &cfg); err != nil {
					return err
				}
				out = append(out, Image{Archive: archive, Manifest: d, Architecture: cfg.Architecture, OS: cfg.OS, Layers: man.Layers})
			default:
				return fmt.Errorf("%s: %s has media type %q", archive, d.Digest, d.MediaType)
			}
		}
		return nil
	}
	if err := walk(top.Manifests); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no image", archive)
	}
	return out, nil
}

// Files calls f with every entry of the image's layers, lowest layer
// first; name is the entry's path without "./" or "/" in front.
func (im Image) Files(f func(name string, h *tar.Header, r io.Reader) error) error {
	for _, l := range im.Layers {
		if l.MediaType != MediaLayer {
			return fmt.Errorf("%s: layer %s has media type %q, want %s", im.Archive, l.Digest, l.MediaType, MediaLayer)
		}
		found := false
		err := EachEntry(im.Archive, func(h *tar.Header, r io.Reader) error {
			if h.Name != BlobPath(l.Digest) {
				return nil
			}
			found = true
			gz, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			tr := tar.NewReader(gz)
			for {
				fh, err := tr.Next()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				name := strings.TrimPrefix(strings.TrimPrefix(fh.Name, "./"), "/")
				if err := f(name, fh, tr); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		})
		if err == nil && !found {
			err = errors.New("missing")
		}
		if err != nil {
			return fmt.Errorf("%s: layer %s: %w", im.Archive, l.Digest, err)
		}
	}
	return nil
}
