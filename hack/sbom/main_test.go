package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// status is a dpkg status file: two packages installed (one built from a
// source package of another name and version), one removed with its
// configuration left, which is not in the image's software.
const status = `Package: keepalived
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 1:2.2.7-1+b2
Source: keepalived (1:2.2.7-1)
Depends: libc6 (>= 2.34)
Description: Failover and monitoring daemon for LVS clusters
 keepalived is used for monitoring real servers within a Linux
 Virtual Server (LVS) cluster.

Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u10
Description: GNU C Library: Shared libraries

Package: oldpkg
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1
`

// fixture builds what a release is made of, small: a Go binary with
// modules in it (hack/gendocs, which links YAML and apimachinery), and an
// image of it by hack/ociimage whose root filesystem has the dpkg status
// above.
type fixture struct {
	dir, binary, other, image, noStatus string
}

func run1(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{dir: dir, binary: filepath.Join(dir, "vipctl"), other: filepath.Join(dir, "other"), image: filepath.Join(dir, "image.tar"), noStatus: filepath.Join(dir, "nostatus.tar")}
	root := filepath.Join("..", "..")
	run1(t, root, "go", "build", "-trimpath", "-o", f.binary, "./hack/gendocs")
	run1(t, root, "go", "build", "-trimpath", "-o", f.other, "./hack/releaseversion")
	for rootfs, files := range map[string]map[string]string{
		"rootfs.tar":   {"./var/lib/dpkg/status": status, "./etc/hostname": "x\n"},
		"nostatus.tar": {"./etc/hostname": "x\n"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, name := range []string{"./etc/hostname", "./var/lib/dpkg/status"} {
			text, ok := files[name]
			if !ok {
				continue
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(text)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(text)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rootfs), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run1(t, root, "go", "run", "./hack/ociimage", "-arch", "amd64", "-rootfs", filepath.Join(dir, "rootfs.tar"), "-add", f.binary+":/usr/bin/vipctl", "-name", "quay.io/vipctl/vipctl:v0.1.0", "-o", f.image)
	run1(t, root, "go", "run", "./hack/ociimage", "-arch", "amd64", "-rootfs", filepath.Join(dir, "nostatus.tar"), "-add", f.binary+":/usr/bin/vipctl", "-name", "quay.io/vipctl/vipctl:v0.1.0", "-o", f.noStatus)
	return f
}

// goVersionM is what `go version -m` says the binary links: each module
// path and version, replacements followed.
func goVersionM(t *testing.T, binary string) map[string]string {
	t.Helper()
	mods := map[string]string{}
	last := ""
	for _, line := range strings.Split(string(run1(t, ".", "go", "version", "-m", binary)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "dep":
			mods[f[1]] = f[2]
			last = f[1]
		case len(f) >= 3 && f[0] == "=>":
			delete(mods, last)
			mods[f[1]] = f[2]
		}
	}
	return mods
}

var spdxID = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

// TestSBOM: the document lists every Go module `go version -m` names for
// the binary and every Debian package the image's dpkg status has
// installed, each with its purl; the image contains the binary; the IDs
// are valid and unique and every relationship joins two of them; two runs
// write the same bytes.
func TestSBOM(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out := filepath.Join(f.dir, "sbom.spdx.json")
	o := options{version: "v0.1.0", binaries: listFlag{f.binary}, images: listFlag{f.image}, out: out, created: time.Unix(1767225600, 0).UTC()}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(first, again) {
		t.Error("two runs on the same inputs wrote different documents")
	}
	var doc document
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.Name != "vipctl-v0.1.0" || doc.CreationInfo.Created != "2026-01-01T00:00:00Z" || !strings.HasPrefix(doc.DocumentNamespace, "https://github.com/vipctl/vipctl/releases/v0.1.0/sbom/") {
		t.Errorf("document header: %+v", doc)
	}

	byID := map[string]pkg{}
	byPurl := map[string]string{}
	for _, p := range doc.Packages {
		if !spdxID.MatchString(p.SPDXID) {
			t.Errorf("package %s: SPDXID %q is not a valid SPDX identifier", p.Name, p.SPDXID)
		}
		if _, dup := byID[p.SPDXID]; dup {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		byID[p.SPDXID] = p
		if p.DownloadLocation == "" || p.LicenseConcluded == "" || p.LicenseDeclared == "" || p.CopyrightText == "" {
			t.Errorf("package %s lacks a field SPDX 2.3 requires: %+v", p.SPDXID, p)
		}
		for _, r := range p.ExternalRefs {
			byPurl[r.ReferenceLocator] = p.SPDXID
		}
	}
	related := map[string]bool{}
	for _, r := range doc.Relationships {
		for _, id := range []string{r.SPDXElementID, r.RelatedSPDXElement} {
			if _, ok := byID[id]; !ok && id != "SPDXRef-DOCUMENT" {
				t.Errorf("relationship %+v names %s, which is no package", r, id)
			}
		}
		related[r.SPDXElementID+" "+r.RelationshipType+" "+r.RelatedSPDXElement] = true
	}
	binary := byPurl["pkg:golang/github.com/vipctl/vipctl@v0.1.0?arch=amd64"]
	image := ""
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose == "CONTAINER" {
			image = p.SPDXID
		}
	}
	if binary == "" || image == "" {
		t.Fatalf("no binary (%q) or no image (%q) among the packages", binary, image)
	}
	for _, want := range []string{
		"SPDXRef-DOCUMENT DESCRIBES " + binary,
		"SPDXRef-DOCUMENT DESCRIBES " + image,
		image + " CONTAINS " + binary,
	} {
		if !related[want] {
			t.Errorf("no relationship %s", want)
		}
	}

	mods := goVersionM(t, f.binary)
	if len(mods) < 3 {
		t.Fatalf("go version -m names %d modules: %v; the fixture wants a binary with some", len(mods), mods)
	}
	for path, v := range mods {
		id, ok := byPurl["pkg:golang/"+path+"@"+v]
		if !ok {
			t.Errorf("module %s %s (go version -m) is not in the SBOM", path, v)
			continue
		}
		if p := byID[id]; p.Name != path || p.VersionInfo != v || !related[binary+" CONTAINS "+id] {
			t.Errorf("module %s %s: package %+v, contained by the binary: %v", path, v, p, related[binary+" CONTAINS "+id])
		}
	}

	debs := map[string]bool{}
	for _, p := range doc.Packages {
		if p.Supplier == "Organization: Debian" {
			debs[p.Name+" "+p.VersionInfo] = true
			if !related[image+" CONTAINS "+p.SPDXID] {
				t.Errorf("the image does not contain %s", p.SPDXID)
			}
		}
	}
	if want := map[string]bool{"keepalived 1:2.2.7-1+b2": true, "libc6 2.36-9+deb12u10": true}; len(debs) != len(want) || !debs["keepalived 1:2.2.7-1+b2"] || !debs["libc6 2.36-9+deb12u10"] {
		t.Errorf("Debian packages %v, want %v (oldpkg is not installed)", debs, want)
	}
	libc := byID[byPurl["pkg:deb/debian/libc6@2.36-9+deb12u10?arch=amd64&distro=debian-12"]]
	if libc.DownloadLocation != "https://snapshot.debian.org/package/glibc/2.36-9+deb12u10/" {
		t.Errorf("libc6 comes from %q, want its source package glibc's", libc.DownloadLocation)
	}
	if keepalived := byPurl["pkg:deb/debian/keepalived@1:2.2.7-1+b2?arch=amd64&distro=debian-12"]; keepalived == "" || byID[keepalived].DownloadLocation != "https://snapshot.debian.org/package/keepalived/1:2.2.7-1/" {
		t.Errorf("keepalived: %+v", byID[keepalived])
	}
}

// TestSBOMRefuses: an image whose vipctl is not a binary of the release,
// or without a dpkg status, makes no SBOM.
func TestSBOMRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name     string
		binaries listFlag
		images   listFlag
		want     string
	}{
		{"the image's vipctl is another binary", listFlag{f.other}, listFlag{f.image}, f.image + `: image for linux/amd64: its /usr/bin/vipctl (SHA-256 "`},
		{"no dpkg status", listFlag{f.binary}, listFlag{f.noStatus}, f.noStatus + ": image for linux/amd64: no /var/lib/dpkg/status"},
		{"no binary", nil, listFlag{f.image}, "-version, -o and at least one -binary are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sbom.json")
			err := run(options{version: "v0.1.0", binaries: tc.binaries, images: tc.images, out: out})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v, want one starting %q", err, tc.want)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("%s written: %v", out, serr)
			}
		})
	}
}
