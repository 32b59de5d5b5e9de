package diagnose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputPath: where `vipctl diagnose -o` may write its bundle, decided
// before anything is gathered (issue 47: `-o .` was "exists; pass --force",
// and with --force failed only after the whole bundle was gathered; a
// symbolic link was replaced by the bundle instead of followed).
func TestOutputPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, root string) string
		replace bool
		// want is the error with ROOT for the directory; "" for none.
		want string
		// at is where the bundle goes when it is accepted.
		at string
	}{
		{name: "a new file", setup: func(_ *testing.T, root string) string { return root + "/b.tar.gz" }, at: "ROOT/b.tar.gz"},
		{name: "a directory", setup: func(_ *testing.T, root string) string { return root }, replace: true,
			want: "ROOT is a directory: name the bundle's file, e.g. ROOT/vipctl-diagnose.tar.gz"},
		{name: "the current directory", setup: func(_ *testing.T, _ string) string { return "." },
			want: ". is a directory: name the bundle's file, e.g. vipctl-diagnose.tar.gz"},
		{name: "in a directory that does not exist", setup: func(_ *testing.T, root string) string { return root + "/no/b.tar.gz" },
			want: "ROOT/no/b.tar.gz: no directory ROOT/no to write it in"},
		{name: "in a file", setup: func(t *testing.T, root string) string { write(t, root+"/f", "x"); return root + "/f/b.tar.gz" },
			want: "ROOT/f/b.tar.gz: no directory ROOT/f to write it in"},
		{name: "an existing file", setup: func(t *testing.T, root string) string { write(t, root+"/b", "old"); return root + "/b" },
			want: "ROOT/b exists"},
		{name: "an existing file replaced", setup: func(t *testing.T, root string) string { write(t, root+"/b", "old"); return root + "/b" },
			replace: true, at: "ROOT/b"},
		{name: "a symbolic link to a file, replaced", setup: func(t *testing.T, root string) string {
			write(t, root+"/bundles/today.tar.gz", "old")
			link(t, "bundles/today.tar.gz", root+"/b")
			return root + "/b"
		}, replace: true, at: "ROOT/bundles/today.tar.gz"},
		{name: "a symbolic link to nothing", setup: func(t *testing.T, root string) string { link(t, "gone", root+"/b"); return root + "/b" },
			replace: true, want: "ROOT/b is a symbolic link to gone, which does not exist"},
		{name: "a symbolic link to a directory", setup: func(t *testing.T, root string) string {
			if err := os.Mkdir(root+"/d", 0o755); err != nil {
				t.Fatal(err)
			}
			link(t, "d", root+"/b")
			return root + "/b"
		}, replace: true, want: "ROOT/b is a directory: name the bundle's file, e.g. ROOT/b/vipctl-diagnose.tar.gz"},
		{name: "a device", setup: func(_ *testing.T, _ string) string { return "/dev/null" }, replace: true,
			want: "/dev/null is not a regular file: name another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			p := tc.setup(t, root)
			at, err := OutputPath(p, tc.replace)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if want := strings.ReplaceAll(tc.want, "ROOT", root); got != want {
				t.Fatalf("OutputPath(%q) error %q, want %q", p, got, want)
			}
			if want := strings.ReplaceAll(tc.at, "ROOT", root); at != want {
				t.Errorf("written at %q, want %q", at, want)
			}
			if tc.want == "ROOT/b exists" && !errors.Is(err, ErrExists) {
				t.Errorf("%v does not wrap ErrExists", err)
			}
			// WriteFile keeps to the same rules, and a link stays a link.
			werr := testArchive("", map[string]string{"a.txt": "a\\n"}).WriteFile(p, tc.replace)
			if (werr == nil) != (err == nil) {
				t.Fatalf("WriteFile: %v, OutputPath: %v", werr, err)
			}
			if err == nil && at != p {
				if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer a symbolic link", p)
				}
			}
		})
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
