package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ign32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/vincent-petithory/dataurl"

	"github.com/vipctl/vipctl/pkg/bootstrap"
)

// bootstrapFromIgnition is what the installer's bootstrap machine runs
// once `vipctl bootstrap ignition` (the real binary, vipctl) has added
// vipctl to its Ignition (an installer-shaped 3.2.0 config): the files
// written as Ignition writes them, under dir/root, and the vipctl
// arguments of the unit's podman command line, the unit's mount (its
// host directory as /vipctl) resolved there. Only podman is left out:
// the lab runs the binary itself.
func bootstrapFromIgnition(t *testing.T, vipctl, dir, cfg, nodes string) []string {
	t.Helper()
	ign := filepath.Join(dir, "bootstrap.ign")
	writeFile(t, ign, []byte(`{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"bootkube.service","enabled":true,"contents":"[Service]\nExecStart=/usr/local/bin/bootkube.sh\n"}]}}`))
	if out, err := exec.Command(vipctl, "bootstrap", "ignition", "-f", cfg, "--nodes", nodes, "--into", ign).CombinedOutput(); err != nil {
		t.Fatalf("vipctl bootstrap ignition: %v: %s", err, out)
	}
	data, err := os.ReadFile(ign)
	if err != nil {
		t.Fatal(err)
	}
	config, rpt, err := ign32.Parse(data)
	if err != nil {
		t.Fatalf("the bootstrap Ignition: %v: %s", err, rpt)
	}
	root := filepath.Join(dir, "root")
	for _, f := range config.Storage.Files {
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f.Path)), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, f.Path), d.Data)
	}
	var execStart []string
	for _, u := range config.Systemd.Units {
		if u.Name != bootstrap.IgnitionUnit || u.Contents == nil {
			continue
		}
		for _, line := range strings.Split(*u.Contents, "\n") {
			if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
				execStart = strings.Fields(cmd)
			}
		}
	}
	// podman run [options] IMAGE vipctl ARGS: the mount is -v HOST:/vipctl:z.
	i := slices.Index(execStart, "vipctl")
	v := slices.Index(execStart, "-v")
	if i < 0 || v < 0 || v+1 >= len(execStart) {
		t.Fatalf("%s's ExecStart is not podman running vipctl with a mount: %q", bootstrap.IgnitionUnit, execStart)
	}
	host, _, _ := strings.Cut(execStart[v+1], ":")
	var args []string
	for _, a := range execStart[i+1:] {
		if rest, ok := strings.CutPrefix(a, "/vipctl/"); ok {
			a = filepath.Join(root, host, rest)
		}
		args = append(args, a)
	}
	t.Logf("the bootstrap machine's unit runs, without podman: vipctl %s", strings.Join(args, " "))
	return args
}
