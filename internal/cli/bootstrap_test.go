package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootstrapStartsNothingOnBadFlags: vipctl bootstrap refuses each bad
// flag before it creates its directory, where every file, pid file and
// daemon log of a run goes: nothing has started.
func TestBootstrapStartsNothingOnBadFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"--yield-after negative", []string{"--yield-after", "-30s"},
			"error: --yield-after -30s: must be positive: how long the control-plane nodes must answer without a break before they get the VIP\n"},
		{"--bootstrap-address unspecified", []string{"--bootstrap-address", "::,0.0.0.0"},
			"error: --bootstrap-address ::: the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)\n" +
				"--bootstrap-address 0.0.0.0: the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)\n"},
		{"--bootstrap-address the API VIP", []string{"--bootstrap-address", "198.51.100.5"},
			"error: --bootstrap-address 198.51.100.5: is spec.api.vips[0] of examples/day1-bootstrap.yaml: haproxy would balance onto the VIP it serves; give the bootstrap machine's own address\n"},
		{"--bootstrap-address loopback", []string{"--bootstrap-address", "127.0.0.1"},
			"error: --bootstrap-address 127.0.0.1: a loopback address: haproxy would balance onto this host, and the control-plane nodes could not reach it either\n"},
		{"--interface no interface", []string{"--interface", "br-ex;reboot"},
			"error: --interface \"br-ex;reboot\": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "run")
			r := run(t, append([]string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--dir", dir}, tc.args...)...)
			if got := strings.ReplaceAll(r.stderr, "../../", ""); r.code != 1 || got != tc.want || r.stdout != "" {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and:\n%s", r.code, r.stdout, got, tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s exists (%v): the run wrote before it refused its flags", dir, err)
			}
		})
	}
}

// TestBootstrapIgnition: `vipctl bootstrap ignition` edits the installer's
// bootstrap.ign in place, keeping its mode, and leaves it as it was when
// the inputs are refused (exit 1, the field named).
func TestBootstrapIgnition(t *testing.T) {
	t.Parallel()
	ign := filepath.Join(t.TempDir(), "bootstrap.ign")
	orig := `{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"bootkube.service","enabled":true,"contents":"[Service]\n"}]}}`
	if err := os.WriteFile(ign, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	r := run(t, "bootstrap", "ignition", "-f", repo("examples/compact-ipv4.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--into", ign)
	if data, _ := os.ReadFile(ign); r.code != 1 || !strings.Contains(r.stderr, "spec.bootstrap: Required value") || string(data) != orig {
		t.Errorf("without spec.bootstrap: exit %d, stderr %q, file changed %v; want exit 1 naming spec.bootstrap, the file as it was", r.code, r.stderr, string(data) != orig)
	}
	r = run(t, "bootstrap", "ignition", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--into", ign)
	data, _ := os.ReadFile(ign)
	st, err := os.Stat(ign)
	if r.code != 0 || err != nil || st.Mode().Perm() != 0o640 || !strings.Contains(string(data), `"vipctl-bootstrap.service"`) || !strings.Contains(string(data), `"bootkube.service"`) {
		t.Errorf("exit %d, stderr %q, mode %v: want exit 0, mode 0640 kept, both units in:\n%s", r.code, r.stderr, st.Mode(), data)
	}
}
