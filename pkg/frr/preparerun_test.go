package frr

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestPrepareRunStartCopy: bgpd starts from a copy of frr.conf, but its
// BFD peers, that user frr owns and alone may read (frr.conf may hold a BGP password and
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
	path := filepath.Join(root, onnode.FRRConfPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	const data = "router bgp 64513\n neighbor 198.51.100.1 password s3cret\n neighbor 198.51.100.1 bfd\n neighbor eno2 bfd\n exit\n"
	const start = "router bgp 64513\n neighbor 198.51.100.1 password s3cret\n exit\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err = PrepareRun(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, onnode.FRRRunDir, startConf); conf != want {
		t.Fatalf("bgpd starts from %s, want %s", conf, want)
	}
	got, err := os.ReadFile(conf)
	if err != nil || string(got) != start {
		t.Errorf("the copy holds %q (err %v), want frr.conf's but its BFD peers (LoadConfig adds them), %q", got, err, start)
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
	if z, err := os.ReadFile(filepath.Join(root, onnode.FRRRunDir, zebraConf)); err != nil || string(z) != zebraLines {
		t.Errorf("zebra's config %q (err %v), want %q", z, err, zebraLines)
	}
}

// TestPrepareRunAsTheContainer: PrepareRun as the frr container runs it,
// root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv drops
// them from a child of this test), twice: a container restart finds the
// run directory user frr's from the last start. Writing zebra's config
// into the directory after handing it to user frr crash-looped the frr
// container in the cluster lab (a fresh-clone rehearsal, 2026-11-29).
func TestPrepareRunAsTheContainer(t *testing.T) {
	if root := os.Getenv("VIPCTL_TEST_PREPARERUN_ROOT"); root != "" {
		for i := 0; i < 2; i++ {
			if _, err := PrepareRun(root); err != nil {
				fmt.Println("PrepareRun:", err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux): %v", err)
	}
	root := t.TempDir()
	path := filepath.Join(root, onnode.FRRConfPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("router bgp 64513\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", os.Args[0], "-test.run", "^TestPrepareRunAsTheContainer$")
	cmd.Env = append(os.Environ(), "VIPCTL_TEST_PREPARERUN_ROOT="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("PrepareRun without CAP_DAC_OVERRIDE: %v\n%s", err, out)
	}
}
