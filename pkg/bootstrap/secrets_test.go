package bootstrap

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ign32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/vincent-petithory/dataurl"

	"github.com/vipctl/vipctl/test/fixture"
)

// routedBootstrapYAML is a routed API VIP whose bootstrap host peers with
// two routers by the default labels (a control-plane node's), both with
// the password of Secret tor-a, and not with rack b's (tor-b).
const routedBootstrapYAML = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: ostest
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api:
    vips: [203.0.113.150]
    routed: true
  bootstrap:
    addresses: [198.51.100.9]
  bgp:
    asn: 64513
    peers:
      - {address: 198.51.100.1, asn: 64512, passwordSecret: tor-a}
      - {address: 198.51.100.2, asn: 64512, passwordSecret: tor-a}
      - {address: 198.51.100.3, asn: 64512, passwordSecret: tor-b, nodeSelector: {rack: b}}
`

// bgpSecretPassword is the password of the tests' Secret manifests.
const bgpSecretPassword = "s3cret-md5"

func writeTemp(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// secretManifest is a Secret manifest as `oc create secret generic
// --dry-run=client -o yaml` prints it (data, base64).
func secretManifest(name, namespace, password string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  creationTimestamp: null
type: kubernetes.io/basic-auth
data:
  password: ` + base64.StdEncoding.EncodeToString([]byte(password)) + "\n"
}

// TestBGPSecrets: the bootstrap host takes the password of each router it
// peers with from the Secret manifest given for it, in data or stringData
// (prepare puts them into the state its frr.conf is rendered from); and
// refuses before anything starts, naming the
// flag's file or the peer's field and never the password, a router left
// without its Secret, a Secret no router it peers with names (rack b's), one
// given twice, one outside vipctl-system, without the key or with a
// password frr.conf cannot hold, a file that is no Secret, and a Secret
// when the host peers with nobody.
func TestBGPSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeTemp(t, dir, "cluster.yaml", routedBootstrapYAML)
	nodes := fixture.Repo("examples/nodes/compact.yaml")
	good := writeTemp(t, dir, "tor-a.yaml", secretManifest("tor-a", "vipctl-system", bgpSecretPassword))
	stringData := writeTemp(t, dir, "tor-a-string.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: tor-a, namespace: vipctl-system}\nstringData: {password: "+bgpSecretPassword+"}\n")
	for _, f := range []string{good, stringData} {
		in, err := readInputs(Options{Config: cfg, Nodes: nodes, BGPSecrets: []string{f}})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if got := in.passwords["tor-a"]; got != bgpSecretPassword || len(in.passwords) != 1 || in.secretFiles["tor-a"] != f {
			t.Errorf("%s: passwords %d, tor-a's right: %v, from %s; want tor-a's alone, from its file", filepath.Base(f), len(in.passwords), got == bgpSecretPassword, in.secretFiles["tor-a"])
		}
	}

	blank := strings.Replace(secretManifest("tor-a", "vipctl-system", "two words"), "kubernetes.io/basic-auth", "Opaque", 1)
	notRouted := writeTemp(t, dir, "not-routed.yaml", strings.NewReplacer("    vips: [203.0.113.150]\n    routed: true\n", "    vips: [198.51.100.5]\n", "passwordSecret: tor-a", "bfd: false").Replace(routedBootstrapYAML))
	for _, tc := range []struct {
		name    string
		config  string
		secrets []string
		want    string
	}{
		{"no Secret for the routers", cfg, nil, "spec.bgp.peers[0].passwordSecret tor-a: the bootstrap host peers with this router"},
		{"rack b's Secret", cfg, []string{good, writeTemp(t, dir, "tor-b.yaml", secretManifest("tor-b", "vipctl-system", bgpSecretPassword))}, "tor-b.yaml: Secret tor-b is the passwordSecret of no peer the bootstrap host peers with (tor-a)"},
		{"given twice", cfg, []string{good, stringData}, "tor-a-string.yaml: Secret tor-a given twice (" + good + " too)"},
		{"another namespace", cfg, []string{writeTemp(t, dir, "ns.yaml", secretManifest("tor-a", "default", bgpSecretPassword))}, `ns.yaml: metadata.namespace "default" of Secret tor-a: want vipctl-system`},
		{"no password key", cfg, []string{writeTemp(t, dir, "nokey.yaml", strings.Replace(secretManifest("tor-a", "vipctl-system", bgpSecretPassword), "  password:", "  username:", 1))}, "nokey.yaml: no key password in the data or stringData of Secret tor-a"},
		{"a password with a blank", cfg, []string{writeTemp(t, dir, "blank.yaml", blank)}, "blank.yaml: key password of Secret tor-a: must be printable ASCII without blanks"},
		{"a ConfigMap", cfg, []string{writeTemp(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tor-a, namespace: vipctl-system}\n")}, `cm.yaml: apiVersion "v1", kind "ConfigMap": want v1, Secret`},
		{"an unknown field", cfg, []string{writeTemp(t, dir, "typo.yaml", strings.Replace(secretManifest("tor-a", "vipctl-system", bgpSecretPassword), "data:", "dat:", 1))}, "typo.yaml: not a Secret manifest"},
		{"no router peered", notRouted, []string{good}, "tor-a.yaml: the bootstrap host peers with no router that has a passwordSecret"},
	} {
		_, err := prepare(Options{Config: tc.config, Nodes: nodes, BGPSecrets: tc.secrets})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
			continue
		}
		for _, pw := range []string{bgpSecretPassword, "two words"} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("%s: the error says the password: %v", tc.name, err)
			}
		}
	}
}

// TestAddToIgnitionBGPSecrets: with a routed API VIP whose routers have a
// password, the Ignition config carries each Secret manifest byte for
// byte, root's alone, and the unit hands it to vipctl bootstrap; the
// bootstrap machine's run reads it back as this one did. Without the
// Secret nothing is added.
func TestAddToIgnitionBGPSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeTemp(t, dir, "cluster.yaml", routedBootstrapYAML)
	secret := writeTemp(t, dir, "tor-a.yaml", secretManifest("tor-a", "vipctl-system", bgpSecretPassword))
	o := Options{Config: cfg, Nodes: fixture.Repo("examples/nodes/compact.yaml"), BGPSecrets: []string{secret}}
	out, err := AddToIgnition([]byte(installerBootstrapIgn), o, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg32, rpt, err := ign32.Parse(out)
	if err != nil {
		t.Fatalf("not an Ignition 3.2 config: %v: %s", err, rpt)
	}
	want, _ := os.ReadFile(secret)
	found := false
	for _, f := range cfg32.Storage.Files {
		if f.Path != IgnitionBGPSecretPath("tor-a") {
			continue
		}
		found = true
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil || string(d.Data) != string(want) || f.Mode == nil || *f.Mode != 0o600 {
			t.Errorf("%s: err %v, mode %v, byte for byte %v; want the manifest, 0600", f.Path, err, f.Mode, err == nil && string(d.Data) == string(want))
		}
		mounted := writeTemp(t, dir, filepath.Base(f.Path), string(d.Data))
		if _, err := readInputs(Options{Config: cfg, Nodes: o.Nodes, BGPSecrets: []string{mounted}}); err != nil {
			t.Errorf("the inputs as the bootstrap machine gets them: %v", err)
		}
	}
	if !found {
		t.Errorf("no file %s", IgnitionBGPSecretPath("tor-a"))
	}
	var unit string
	for _, u := range cfg32.Systemd.Units {
		if u.Name == IgnitionUnit && u.Contents != nil {
			unit = *u.Contents
		}
	}
	if w := " vipctl bootstrap -f /vipctl/cluster.yaml --nodes /vipctl/nodes.yaml --bgp-secret /vipctl/bgp-secret-tor-a.yaml\n"; !strings.Contains(unit, w) {
		t.Errorf("%s lacks %q:\n%s", IgnitionUnit, w, unit)
	}
	o.BGPSecrets = nil
	if _, err := AddToIgnition([]byte(installerBootstrapIgn), o, ""); err == nil || !strings.Contains(err.Error(), "spec.bgp.peers[0].passwordSecret tor-a: ") {
		t.Errorf("without the Secret: %v, want the peer's passwordSecret required", err)
	}
}
