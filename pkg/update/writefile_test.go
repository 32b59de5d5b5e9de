package update

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileFollowsLinksAndKeepsOwner: `vipctl update` rewrites the
// cluster file where it lives: through a symbolic link (the link stays,
// the file it names changes), and with its mode and owner (issue 47: a
// link was replaced by a copy, leaving the file it named as it was).
func TestWriteFileFollowsLinksAndKeepsOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup returns the path update is given and the file that must
		// change.
		setup    func(t *testing.T, root string) (given, file string)
		mode     os.FileMode
		uid, gid int // -1: the process's
	}{
		{
			name: "a symbolic link to the file",
			setup: func(t *testing.T, root string) (string, string) {
				mustWriteFile(t, root+"/git/cluster.yaml", 0o640)
				if err := os.Symlink("git/cluster.yaml", root+"/cluster.yaml"); err != nil {
					t.Fatal(err)
				}
				return root + "/cluster.yaml", root + "/git/cluster.yaml"
			},
			mode: 0o640, uid: -1, gid: -1,
		},
		{
			name: "a chain of links",
			setup: func(t *testing.T, root string) (string, string) {
				mustWriteFile(t, root+"/a/cluster.yaml", 0o600)
				if err := os.Symlink("a/cluster.yaml", root+"/b.yaml"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("b.yaml", root+"/c.yaml"); err != nil {
					t.Fatal(err)
				}
				return root + "/c.yaml", root + "/a/cluster.yaml"
			},
			mode: 0o600, uid: -1, gid: -1,
		},
		{
			name: "another user's file",
			setup: func(t *testing.T, root string) (string, string) {
				if os.Geteuid() != 0 {
					t.Fatal("a file of another user needs root: run the tests as root, as CI does")
				}
				mustWriteFile(t, root+"/cluster.yaml", 0o644)
				if err := os.Chown(root+"/cluster.yaml", 4242, 4343); err != nil {
					t.Fatal(err)
				}
				return root + "/cluster.yaml", root + "/cluster.yaml"
			},
			mode: 0o644, uid: 4242, gid: 4343,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			given, file := tc.setup(t, root)
			before, err := os.Lstat(given)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(given, []byte("new\n")); err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(file); err != nil || string(data) != "new\n" {
				t.Errorf("%s: %q, %v; want the new content", file, data, err)
			}
			after, err := os.Lstat(given)
			if err != nil {
				t.Fatal(err)
			}
			if before.Mode().Type() != after.Mode().Type() {
				t.Errorf("%s was a %v, is a %v", given, before.Mode().Type(), after.Mode().Type())
			}
			st, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tc.mode {
				t.Errorf("mode %v, want %v", st.Mode().Perm(), tc.mode)
			}
			sys := st.Sys().(*syscall.Stat_t)
			uid, gid := tc.uid, tc.gid
			if uid < 0 {
				uid, gid = os.Geteuid(), int(sys.Gid)
			}
			if int(sys.Uid) != uid || int(sys.Gid) != gid {
				t.Errorf("owner %d:%d, want %d:%d", sys.Uid, sys.Gid, uid, gid)
			}
			entries, _ := os.ReadDir(filepath.Dir(file))
			if len(entries) != 1 && filepath.Dir(file) != root {
				t.Errorf("left beside the file: %v", entries)
			}
		})
	}
}

func mustWriteFile(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("old\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
