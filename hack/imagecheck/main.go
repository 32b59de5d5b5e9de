// Command imagecheck checks that every ELF file in an image is built for
// the image's architecture: an arm64 image whose root filesystem came from
// a foreign-architecture build (mmdebstrap --arch=arm64 under emulation)
// must not carry one amd64 binary, nor vipctl built for the wrong GOARCH.
// hack/build-image.sh runs it on every image it writes, so make image and
// make release fail on such an image.
//
//	imagecheck [-arch ARCH] ARCHIVE...
//
// Each archive is an OCI archive (hack/ociimage's output); every image in
// it is checked against its own configuration's architecture, and, with
// -arch, must be of that architecture.
package main

import (
	"archive/tar"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vipctl/vipctl/hack/internal/ociarchive"
)

// machines maps GOARCH's names, which image configurations use, to the
// ELF machine of their binaries.
var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

func main() {
	arch := flag.String("arch", "", "the architecture every image must be of (amd64, arm64); by default each image's own")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: imagecheck [-arch ARCH] ARCHIVE...")
		os.Exit(2)
	}
	failed := false
	for _, archive := range flag.Args() {
		summary, err := checkArchive(archive, *arch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "imagecheck:", err)
			failed = true
			continue
		}
		fmt.Println("imagecheck:", summary)
	}
	if failed {
		os.Exit(1)
	}
}

// checkArchive checks every image of the archive; the summary counts the
// ELF files it read.
func checkArchive(archive, arch string) (string, error) {
	top, err := ociarchive.Top(archive)
	if err != nil {
		return "", err
	}
	images, err := ociarchive.Images(archive)
	if err != nil {
		return "", err
	}
	var summaries []string
	for _, im := range images {
		if arch != "" && im.Architecture != arch {
			return "", fmt.Errorf("%s: an image for %s/%s, want %s", archive, im.OS, im.Architecture, arch)
		}
		want, ok := machines[im.Architecture]
		if !ok {
			return "", fmt.Errorf("%s: image %s: unknown architecture %q", archive, im.Manifest.Digest, im.Architecture)
		}
		var c checker
		c.want = want
		if err := im.Files(func(name string, h *tar.Header, r io.Reader) error {
			if h.Typeflag != tar.TypeReg {
				return nil
			}
			return c.file(name, r)
		}); err != nil {
			return "", err
		}
		if len(c.wrong) > 0 {
			return "", fmt.Errorf("%s: image for %s/%s (%s): %d of %d ELF files are not %s:\n  %s", archive, im.OS, im.Architecture, im.Manifest.Digest, len(c.wrong), c.elves, want, strings.Join(c.wrong, "\n  "))
		}
		if c.elves == 0 {
			return "", fmt.Errorf("%s: image for %s/%s has no ELF file at all", archive, im.OS, im.Architecture)
		}
		summaries = append(summaries, fmt.Sprintf("%s/%s %s: %d ELF files, every one %s", im.OS, im.Architecture, im.Manifest.Digest, c.elves, want))
	}
	return fmt.Sprintf("%s: %s %s: %s", archive, top.Annotations["org.opencontainers.image.ref.name"], top.Digest, strings.Join(summaries, "; ")), nil
}

// checker judges the files of one image.
type checker struct {
	want  elf.Machine
	elves int
	// wrong names each ELF file of another machine, with its machine.
	wrong []string
}

func (c *checker) file(name string, r io.Reader) error {
	m, ok, err := machine(r)
	if err != nil || !ok {
		return err
	}
	c.elves++
	if m != c.want {
		c.wrong = append(c.wrong, fmt.Sprintf("%s: %s", name, m))
	}
	return nil
}

// machine reads an ELF header's machine; ok is false for a file that is
// not ELF.
func machine(r io.Reader) (m elf.Machine, ok bool, err error) {
	// e_ident (16 bytes), e_type (2), e_machine (2): the same offsets in
	// 32- and 64-bit files.
	var h [20]byte
	n, err := io.ReadFull(r, h[:])
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if n >= 4 && string(h[:4]) == elf.ELFMAG {
			return 0, false, errors.New("an ELF file too short for its header")
		}
		return 0, false, nil // a short file of something else
	}
	if err != nil {
		return 0, false, err
	}
	if string(h[:4]) != elf.ELFMAG {
		return 0, false, nil
	}
	var order binary.ByteOrder
	switch elf.Data(h[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		order = binary.BigEndian
	default:
		return 0, false, fmt.Errorf("ELF with unknown byte order %d", h[elf.EI_DATA])
	}
	return elf.Machine(order.Uint16(h[18:20])), true, nil
}
