// Command sbom writes a release's software bill of materials as SPDX 2.3
// JSON: each vipctl binary with the Go modules linked into it (its build
// information, what `go version -m` prints) and each image with the
// Debian packages installed in it (its dpkg status file) and the vipctl
// binary at /usr/bin/vipctl, which must be one of the binaries given.
//
//	sbom -version v0.1.0 -binary vipctl-linux-amd64 -binary vipctl-linux-arm64 \
//	     -image vipctl-image-linux-amd64.tar -image vipctl-image-linux-arm64.tar -o vipctl.spdx.json
//
// The document is a function of its inputs: created at SOURCE_DATE_EPOCH,
// its namespace named by their digests, every list sorted.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vipctl/hack/internal/ociarchive"
	"github.com/vipctl/vipctl/pkg/version"
)

// listFlag collects a repeated flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	version  string
	binaries listFlag
	images   listFlag
	out      string
	created  time.Time
}

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "the release's version (vipctl version)")
	flag.Var(&o.binaries, "binary", "a vipctl binary of the release (repeatable)")
	flag.Var(&o.images, "image", "an OCI archive of the release's image(s) (repeatable)")
	flag.StringVar(&o.out, "o", "", "the SPDX JSON file to write")
	flag.Parse()
	o.created = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sbom: SOURCE_DATE_EPOCH=%q: %v\n", s, err)
			os.Exit(1)
		}
		o.created = time.Unix(n, 0).UTC()
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.version == "" || o.out == "" || len(o.binaries) == 0 {
		return errors.New("-version, -o and at least one -binary are required")
	}
	doc, err := build(o)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, o.out)
}

// The SPDX 2.3 document, the fields this command writes.
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID                string        `json:"SPDXID"`
	Name                  string        `json:"name"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []checksum    `json:"checksums,omitempty"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	Supplier              string        `json:"supplier,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	Comment               string        `json:"comment,omitempty"`
	ExternalRefs          []externalRef `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type externalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// sbom collects packages, each once, and relationships.
type sbom struct {
	packages map[string]pkg // by SPDXID
	// keys maps what identifies a package (its purl, or a file's digest)
	// to its SPDXID.
	keys          map[string]string
	relationships map[relationship]bool
}

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// add records p under key once and returns its SPDXID, made from its
// name and version.
func (s *sbom) add(key, prefix string, p pkg) string {
	if id, ok := s.keys[key]; ok {
		return id
	}
	base := "SPDXRef-" + prefix + "-" + strings.Trim(notIDChar.ReplaceAllString(p.Name+"-"+p.VersionInfo, "-"), "-")
	id := base
	for n := 2; s.packages[id].SPDXID != ""; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	p.SPDXID = id
	if p.DownloadLocation == "" {
		p.DownloadLocation = noAssertion
	}
	p.LicenseConcluded, p.LicenseDeclared, p.CopyrightText = noAssertion, noAssertion, noAssertion
	s.packages[id] = p
	s.keys[key] = id
	return id
}

func (s *sbom) relate(from, kind, to string) {
	s.relationships[relationship{SPDXElementID: from, RelationshipType: kind, RelatedSPDXElement: to}] = true
}

func purl(locator string) []externalRef {
	return []externalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: locator}}
}

func build(o options) (document, error) {
	s := &sbom{packages: map[string]pkg{}, keys: map[string]string{}, relationships: map[relationship]bool{}}
	var described []string
	// Digests of every input, for the namespace.
	var inputs []string
	binaryIDs := map[string]string{} // by SHA-256
	for _, path := range o.binaries {
		data, err := os.ReadFile(path)
		if err != nil {
			return document{}, err
		}
		id, sum, err := s.addBinary(path, data, o.version)
		if err != nil {
			return document{}, err
		}
		binaryIDs[sum] = id
		inputs = append(inputs, sum)
		described = append(described, id)
	}
	for _, archive := range o.images {
		images, err := ociarchive.Images(archive)
		if err != nil {
			return document{}, err
		}
		for _, im := range images {
			id, err := s.addImage(im, o.version, binaryIDs)
			if err != nil {
				return document{}, err
			}
			inputs = append(inputs, im.Manifest.Digest)
			described = append(described, id)
		}
	}
	sort.Strings(inputs)
	sum := sha256.Sum256([]byte(strings.Join(inputs, "\n")))
	doc := document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "vipctl-" + o.version,
		DocumentNamespace: "https://github.com/vipctl/vipctl/releases/" + url.PathEscape(o.version) + "/sbom/" + hex.EncodeToString(sum[:]),
		CreationInfo: creationInfo{
			Created:  o.created.Format(time.RFC3339),
			Creators: []string{"Organization: vipctl", "Tool: vipctl-hack-sbom-" + o.version},
		},
	}
	for _, id := range described {
		s.relate("SPDXRef-DOCUMENT", "DESCRIBES", id)
	}
	for _, p := range s.packages {
		doc.Packages = append(doc.Packages, p)
	}
	sort.Slice(doc.Packages, func(i, j int) bool { return doc.Packages[i].SPDXID < doc.Packages[j].SPDXID })
	for r := range s.relationships {
		doc.Relationships = append(doc.Relationships, r)
	}
	sort.Slice(doc.Relationships, func(i, j int) bool {
		a, b := doc.Relationships[i], doc.Relationships[j]
		if a.SPDXElementID != b.SPDXElementID {
			return a.SPDXElementID < b.SPDXElementID
		}
		if a.RelationshipType != b.RelationshipType {
			return a.RelationshipType < b.RelationshipType
		}
		return a.RelatedSPDXElement < b.RelatedSPDXElement
	})
	return doc, nil
}

// addBinary adds a vipctl binary and the Go modules its build
// information names (the toolchain's standard library among them); it
// returns the binary's SPDXID and SHA-256.
func (s *sbom) addBinary(path string, data []byte, release string) (id, sum string, err error) {
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	settings := map[string]string{}
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	platform := settings["GOOS"] + "/" + settings["GOARCH"]
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	id = s.add("file:"+sum, "vipctl", pkg{
		Name: "vipctl-" + strings.ReplaceAll(platform, "/", "-"), VersionInfo: release,
		DownloadLocation:      "https://github.com/vipctl/vipctl",
		Checksums:             []checksum{{Algorithm: "SHA256", ChecksumValue: sum}},
		PrimaryPackagePurpose: "APPLICATION",
		Comment:               fmt.Sprintf("the vipctl command for %s, built by %s from module %s", platform, bi.GoVersion, bi.Path),
		ExternalRefs:          purl("pkg:golang/" + bi.Main.Path + "@" + release + "?arch=" + settings["GOARCH"]),
	})
	std := s.add("purl:pkg:golang/stdlib@"+bi.GoVersion, "go", pkg{
		Name: "stdlib", VersionInfo: bi.GoVersion, DownloadLocation: "https://go.dev/dl/",
		Comment: "the Go toolchain's standard library", ExternalRefs: purl("pkg:golang/stdlib@" + bi.GoVersion),
	})
	s.relate(id, "CONTAINS", std)
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		locator := "pkg:golang/" + m.Path + "@" + m.Version
		p := pkg{Name: m.Path, VersionInfo: m.Version, ExternalRefs: purl(locator)}
		if m.Sum != "" {
			p.Comment = "go.sum hash " + m.Sum
		}
		s.relate(id, "CONTAINS", s.add("purl:"+locator, "go", p))
	}
	return id, sum, nil
}

// addImage adds an image, the Debian packages of its dpkg status and the
// vipctl binary in it, which must be one of binaries (by SHA-256).
func (s *sbom) addImage(im ociarchive.Image, release string, binaries map[string]string) (string, error) {
	var status []byte
	vipctl := ""
	err := im.Files(func(name string, h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		switch name {
		case "var/lib/dpkg/status":
			data, err := io.ReadAll(r)
			status = data
			return err
		case "usr/bin/vipctl":
			sum := sha256.New()
			if _, err := io.Copy(sum, r); err != nil {
				return err
			}
			vipctl = hex.EncodeToString(sum.Sum(nil))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	where := fmt.Sprintf("%s: image for %s/%s", im.Archive, im.OS, im.Architecture)
	if status == nil {
		return "", fmt.Errorf("%s: no /var/lib/dpkg/status", where)
	}
	binary, ok := binaries[vipctl]
	if !ok {
		return "", fmt.Errorf("%s: its /usr/bin/vipctl (SHA-256 %q) is none of the binaries given", where, vipctl)
	}
	// The tag build-image.sh gives it: a tag may not hold '+'.
	imageTag := strings.ReplaceAll(release, "+", "-")
	id := s.add("image:"+im.Manifest.Digest, "image", pkg{
		Name: "vipctl-image-" + im.OS + "-" + im.Architecture, VersionInfo: release,
		Checksums:             []checksum{{Algorithm: "SHA256", ChecksumValue: strings.TrimPrefix(im.Manifest.Digest, "sha256:")}},
		PrimaryPackagePurpose: "CONTAINER",
		Comment:               fmt.Sprintf("%s:%s for %s/%s, manifest %s", version.ImageRepository, imageTag, im.OS, im.Architecture, im.Manifest.Digest),
		ExternalRefs:          purl(fmt.Sprintf("pkg:oci/vipctl@%s?arch=%s&repository_url=%s&tag=%s", url.QueryEscape(im.Manifest.Digest), im.Architecture, url.QueryEscape(version.ImageRepository), url.QueryEscape(imageTag))),
	})
	s.relate(id, "CONTAINS", binary)
	debs, err := installed(status)
	if err != nil {
		return "", fmt.Errorf("%s: /var/lib/dpkg/status: %w", where, err)
	}
	for _, d := range debs {
		locator := "pkg:deb/debian/" + d.name + "@" + url.PathEscape(d.version) + "?arch=" + d.arch + "&distro=debian-12"
		p := pkg{
			Name: d.name, VersionInfo: d.version, Supplier: "Organization: Debian",
			DownloadLocation: "https://snapshot.debian.org/package/" + d.source + "/" + url.PathEscape(d.sourceVersion) + "/",
			ExternalRefs:     purl(locator),
			Comment:          fmt.Sprintf("Debian package %s %s (%s), source package %s %s", d.name, d.version, d.arch, d.source, d.sourceVersion),
		}
		s.relate(id, "CONTAINS", s.add("purl:"+locator, "deb", p))
	}
	return id, nil
}

type deb struct {
	name, version, arch, source, sourceVersion string
}

// installed reads a dpkg status file: the packages whose status is
// "install ok installed", sorted by name.
func installed(status []byte) ([]deb, error) {
	var out []deb
	fields := map[string]string{}
	last := ""
	flush := func() error {
		defer func() { fields = map[string]string{} }()
		if len(fields) == 0 {
			return nil
		}
		if fields["Status"] != "install ok installed" {
			return nil
		}
		d := deb{name: fields["Package"], version: fields["Version"], arch: fields["Architecture"]}
		if d.name == "" || d.version == "" || d.arch == "" {
			return fmt.Errorf("a package without Package, Version or Architecture: %v", fields)
		}
		// Source: NAME or NAME (VERSION); the binary's own otherwise.
		d.source, d.sourceVersion = d.name, d.version
		if src := fields["Source"]; src != "" {
			name, v, ok := strings.Cut(src, " (")
			d.source = name
			if ok {
				d.sourceVersion = strings.TrimSuffix(v, ")")
			}
		}
		out = append(out, d)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += "\n" + line
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("line %q has no field name", line)
			}
			last = k
			fields[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].arch < out[j].arch
	})
	return out, nil
}
