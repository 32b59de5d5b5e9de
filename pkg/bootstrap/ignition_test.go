package bootstrap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ign32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/vincent-petithory/dataurl"

	"github.com/vipctl/vipctl/test/fixture"
)

// installerBootstrapIgn has the shape of openshift-install's bootstrap.ign
// (Ignition 3.2.0): the pull secret, a unit of its own, a user.
const installerBootstrapIgn = `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAC3 admin"]}]},` +
	`"storage":{"files":[{"overwrite":true,"path":"/root/.docker/config.json","user":{"name":"root"},"contents":{"source":"data:text/plain;charset=utf-8;base64,e30K"},"mode":420}]},` +
	`"systemd":{"units":[{"contents":"[Service]\nExecStart=/usr/local/bin/bootkube.sh\n","enabled":true,"name":"bootkube.service"}]}}`

// TestAddToIgnition: the installer's config keeps what it had and gains
// the two inputs, byte for byte and root-only, and the enabled unit that
// runs `vipctl bootstrap` on them in the cluster's image; the result is a
// valid Ignition 3.2 config (the bootstrap machine's), the inputs it
// carries pass a run's checks where the unit mounts them, and adding
// again changes nothing.
func TestAddToIgnition(t *testing.T) {
	t.Parallel()
	o := Options{Config: fixture.Repo("examples/day1-bootstrap.yaml"), Nodes: fixture.Repo("examples/nodes/compact.yaml")}
	out, err := AddToIgnition([]byte(installerBootstrapIgn), o, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := ign32.Parse(out)
	if err != nil {
		t.Fatalf("not an Ignition 3.2 config: %v: %s", err, rpt)
	}
	dir := t.TempDir()
	paths := map[string]string{}
	for _, f := range cfg.Storage.Files {
		paths[f.Path] = ""
		if !strings.HasPrefix(f.Path, IgnitionDir+"/") {
			continue
		}
		if f.Mode == nil || *f.Mode != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f.Path, f.Mode)
		}
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		want, _ := os.ReadFile(map[string]string{IgnitionConfigPath: o.Config, IgnitionNodesPath: o.Nodes}[f.Path])
		if string(d.Data) != string(want) {
			t.Errorf("%s does not hold its input byte for byte", f.Path)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.Path)), d.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/root/.docker/config.json", IgnitionConfigPath, IgnitionNodesPath} {
		if _, ok := paths[p]; !ok {
			t.Errorf("no file %s in %v", p, paths)
		}
	}
	units := map[string]string{}
	for _, u := range cfg.Systemd.Units {
		if u.Enabled == nil || !*u.Enabled || u.Contents == nil {
			t.Errorf("unit %s not enabled with contents", u.Name)
			continue
		}
		units[u.Name] = *u.Contents
	}
	unit := units[IgnitionUnit]
	for _, want := range []string{
		"-v " + IgnitionDir + ":/vipctl:z quay.io/vipctl/vipctl:",
		" vipctl bootstrap -f /vipctl/cluster.yaml --nodes /vipctl/nodes.yaml\n",
		"--net=host --privileged --user 0 ",
		"WantedBy=multi-user.target",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("%s lacks %q:\n%s", IgnitionUnit, want, unit)
		}
	}
	if _, ok := units["bootkube.service"]; !ok || len(cfg.Passwd.Users) != 1 {
		t.Errorf("the installer's own unit or user lost: units %v, users %v", units, cfg.Passwd.Users)
	}
	// The unit's run reads its mounted inputs as this one did.
	if _, err := readInputs(Options{Config: filepath.Join(dir, "cluster.yaml"), Nodes: filepath.Join(dir, "nodes.yaml")}); err != nil {
		t.Errorf("the inputs as the bootstrap machine gets them: %v", err)
	}
	again, err := AddToIgnition(out, o, "")
	if err != nil || string(again) != string(out) {
		t.Errorf("adding again: err %v, changed: %v", err, string(again) != string(out))
	}
	// Named as the install-config's bootstrap VM: taken.
	day1, _ := os.ReadFile(o.Config)
	vm := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(vm, []byte(strings.Replace(string(day1), "addresses: [198.51.100.9]", "addresses: [198.51.100.10]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AddToIgnition([]byte(installerBootstrapIgn), Options{Config: vm, Nodes: o.Nodes}, fixture.Repo("examples/installer/install-config.yaml")); err != nil {
		t.Errorf("spec.bootstrap naming bootstrapExternalStaticIP: %v", err)
	}
}

// TestAddToIgnitionRefuses: nothing is added to a config that is not an
// Ignition 3 one, nor from inputs a run would refuse, each named.
func TestAddToIgnitionRefuses(t *testing.T) {
	t.Parallel()
	day1, nodes := fixture.Repo("examples/day1-bootstrap.yaml"), fixture.Repo("examples/nodes/compact.yaml")
	v22, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "2.2.0"}})
	for _, tc := range []struct {
		name          string
		ign           string
		o             Options
		installConfig string
		want          string
	}{
		{"not JSON", "bootstrap", Options{Config: day1, Nodes: nodes}, "", "not an Ignition config"},
		{"Ignition 2", string(v22), Options{Config: day1, Nodes: nodes}, "", `ignition.version "2.2.0"`},
		{"no version", `{"storage":{}}`, Options{Config: day1, Nodes: nodes}, "", `ignition.version ""`},
		{"files not a list", `{"ignition":{"version":"3.2.0"},"storage":{"files":{}}}`, Options{Config: day1, Nodes: nodes}, "", "storage.files"},
		{"no bootstrap host", installerBootstrapIgn, Options{Config: fixture.Repo("examples/compact-ipv4.yaml"), Nodes: nodes}, "", "spec.bootstrap: Required value"},
		{"no node list", installerBootstrapIgn, Options{Config: day1, Nodes: filepath.Join(t.TempDir(), "nodes.yaml")}, "", "--nodes"},
		// day1-bootstrap.yaml names the provisioning host (198.51.100.9),
		// the install-config the VM's own address (198.51.100.10).
		{"the VM's address not named", installerBootstrapIgn, Options{Config: day1, Nodes: nodes}, fixture.Repo("examples/installer/install-config.yaml"),
			"spec.bootstrap.addresses: Invalid value: [198.51.100.9]: the bootstrap machine runs vipctl bootstrap itself, so they must name its address, platform.baremetal.bootstrapExternalStaticIP 198.51.100.10"},
	} {
		_, err := AddToIgnition([]byte(tc.ign), tc.o, tc.installConfig)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
