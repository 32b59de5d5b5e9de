package frr

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/vipctl/vipctl/pkg/render"
)

// TestPrepareRunStartCopy: bgpd starts from a copy of frr.conf that
// user frr owns and alone may read (frr.conf may hold a BGP password and
// is root's, in a directory the frr container mounts read-only, so it is
// left as it is), and zebra's config is written beside it; without
// frr.conf bgpd starts empty.
func TestPrepareRunStartCopy(t *testing.T) {
	u, err := user.Lookup(frrUser)
	if err != nil {
		t.Fatalf("FRR's user: %v (run hack/install-deps.sh)", err)
	}
	root := t.TempDir()
	conf, err := PrepareRun(root)
	if err != nil || conf != os.DevNull {
		t.Fatalf("without frr.conf: %q, %v; want %s", conf, err, os.DevNull)
	}
	path := filepath.Join(root, render.FRRConfPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	const data = "router bgp 64513\n neighbor 198.51.100.1 password s3cret\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err = PrepareRun(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, render.FRRRunDir, startConf); conf != want {
		t.Fatalf("bgpd starts from %s, want %s", conf, want)
	}
	got, err := os.ReadFile(conf)
	if err != nil || string(got) != data {
		t.Errorf("the copy holds %q (err %v), want frr.conf's", got, err)
	}
	fi, err := os.Stat(conf)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if strconv.Itoa(int(st.Uid)) != u.Uid || fi.Mode().Perm() != 0o600 {
		t.Errorf("the copy is uid %d mode %v, want user frr's (%s) alone, 0600", st.Uid, fi.Mode().Perm(), u.Uid)
	}
	if fi, err := os.Stat(path); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("frr.conf itself was handed over (err %v)", err)
	}
	if z, err := os.ReadFile(filepath.Join(root, render.FRRRunDir, zebraConf)); err != nil || string(z) != zebraLines {
		t.Errorf("zebra's config %q (err %v), want %q", z, err, zebraLines)
	}
}
