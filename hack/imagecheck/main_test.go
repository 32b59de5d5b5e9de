package main

import (
	"bytes"
	"debug/elf"
	"os"
	"strings"
	"testing"
)

// header is the start of an ELF file of the machine, class and byte order.
func header(m elf.Machine, class elf.Class, data elf.Data) []byte {
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(class), byte(data), byte(elf.EV_CURRENT)
	if data == elf.ELFDATA2MSB {
		h[18], h[19] = byte(m>>8), byte(m)
	} else {
		h[18], h[19] = byte(m), byte(m>>8)
	}
	return h
}

// TestChecker: in an arm64 image every ELF file must be aarch64; other
// files (scripts, data, short files) are not judged, and each foreign
// binary is named with its machine.
func TestChecker(t *testing.T) {
	t.Parallel()
	c := checker{want: elf.EM_AARCH64}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"usr/bin/vipctl", header(elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2LSB)},
		{"usr/lib/aarch64-linux-gnu/libc.so.6", header(elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2LSB)},
		{"usr/sbin/keepalived", header(elf.EM_X86_64, elf.ELFCLASS64, elf.ELFDATA2LSB)},
		{"usr/lib/x86_64-linux-gnu/ld-linux.so.2", header(elf.EM_386, elf.ELFCLASS32, elf.ELFDATA2LSB)},
		{"usr/bin/big-endian", header(elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2MSB)},
		{"usr/lib/frr/frr-reload.py", []byte("#!/usr/bin/python3\nimport sys\n")},
		{"etc/hostname", []byte("x\n")},
		{"empty", nil},
	} {
		if err := c.file(f.name, bytes.NewReader(f.data)); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
	if c.elves != 5 {
		t.Errorf("%d ELF files counted, want 5", c.elves)
	}
	want := "usr/sbin/keepalived: EM_X86_64\nusr/lib/x86_64-linux-gnu/ld-linux.so.2: EM_386"
	if got := strings.Join(c.wrong, "\n"); got != want {
		t.Errorf("foreign files:\n%s\nwant\n%s", got, want)
	}
	if err := c.file("truncated", bytes.NewReader([]byte("\x7fELF\x02\x01"))); err == nil || err.Error() != "an ELF file too short for its header" {
		t.Errorf("a truncated ELF file: %v", err)
	}
}

// TestMachineAgreesWithDebugELF: the header read here says what Go's ELF
// reader says of a real binary (this test's own).
func TestMachineAgreesWithDebugELF(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, ok, err := machine(r)
	if err != nil || !ok || m != f.Machine {
		t.Errorf("machine: %v, %v, %v; debug/elf says %v", m, ok, err, f.Machine)
	}
}
