package diagnose

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func testArchive(dir string, files map[string]string) *Archive {
	a := newArchive(dir, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	for n, d := range files {
		a.add(n, []byte(d))
	}
	return a
}

// TestWriteFile: the bundle is put in place whole; an existing file is
// kept unless replace is asked, and no temporary file is left either way.
func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "bundle.tar.gz")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := testArchive("", map[string]string{"a.txt": "token: abc\n"})
	a.fail("logs", errors.New("the kubelet does not answer"))
	if err := a.WriteFile(p, false); !errors.Is(err, ErrExists) {
		t.Fatalf("over an existing file without replace: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("the existing file was changed: %q", b)
	}
	if err := a.WriteFile(p, true); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode())
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	back, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", ProblemsFile, "version.json"}; !slices.Equal(back.Names(), want) {
		t.Errorf("names %v, want %v", back.Names(), want)
	}
	if b, _ := back.File("a.txt"); string(b) != "token: <redacted>\n" {
		t.Errorf("a.txt = %q: not redacted", b)
	}
	if b, _ := back.File(ProblemsFile); !bytes.Contains(b, []byte("the kubelet does not answer")) {
		t.Errorf("problems: %s", b)
	}
	// A new file in a directory that does not exist: an error, nothing made.
	if err := a.WriteFile(filepath.Join(dir, "no", "b.tar.gz"), false); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestMerge: a node's bundle joins the cluster's; a name both hold is
// refused rather than one of them lost.
func TestMerge(t *testing.T) {
	t.Parallel()
	cluster := testArchive("", map[string]string{"status/status.txt": "ok\n"})
	node := testArchive(LocalDir("master-0"), map[string]string{LocalDir("master-0") + "/files.json": "[]\n"})
	var buf bytes.Buffer
	if err := node.Write(&buf); err != nil {
		t.Fatal(err)
	}
	nodeBundle := buf.Bytes()
	if err := cluster.Merge(bytes.NewReader(nodeBundle)); err != nil {
		t.Fatal(err)
	}
	want := []string{"nodes/master-0/local/files.json", "nodes/master-0/local/version.json", "status/status.txt", "version.json"}
	if !slices.Equal(cluster.Names(), want) {
		t.Errorf("merged: %v, want %v", cluster.Names(), want)
	}
	if err := cluster.Merge(bytes.NewReader(nodeBundle)); err == nil {
		t.Error("the same node bundle merged twice")
	}
	if err := cluster.Merge(bytes.NewReader([]byte("not gzip"))); err == nil {
		t.Error("merged a file that is no bundle")
	}
}
