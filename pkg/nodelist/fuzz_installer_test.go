package nodelist

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/test/fixture"
)

// FuzzInstallerFiles: any bytes given as install-config.yaml and
// agent-config.yaml (vipctl nodes --install-config --agent-config). No
// input may panic; a node list it accepts names each node by one safe
// path element with no line break, gives no address to two nodes, and
// takes every node's addresses from inside the install-config's machine
// networks. The seeds are the example installer files, testdata/installer's and
// testdata/bad-input/install-config-*.yaml.
func FuzzInstallerFiles(f *testing.F) {
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	agent := read(fixture.Repo("examples/installer/agent-config.yaml"))
	f.Add(read(fixture.Repo("examples/installer/agent-install-config.yaml")), agent)
	f.Add(read(fixture.Repo("examples/installer/install-config.yaml")), []byte{})
	f.Add(read(fixture.Repo("testdata/installer/dual-stack-install-config.yaml")), read(fixture.Repo("testdata/installer/dual-stack-agent-config.yaml")))
	bad, _ := filepath.Glob(fixture.Repo("testdata/bad-input/install-config-*.yaml"))
	for _, p := range bad {
		f.Add(read(p), agent)
	}
	f.Fuzz(func(t *testing.T, ic, ac []byte) {
		dir := t.TempDir()
		in := Installer{InstallConfig: filepath.Join(dir, "install-config.yaml")}
		if err := os.WriteFile(in.InstallConfig, ic, 0o600); err != nil {
			t.Fatal(err)
		}
		if len(ac) > 0 {
			in.AgentConfig = filepath.Join(dir, "agent-config.yaml")
			if err := os.WriteFile(in.AgentConfig, ac, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		nodes, _, err := FromInstaller(in)
		if err != nil {
			return
		}
		var ic0 installConfig
		if err := readFile(in.InstallConfig, &ic0, "an install-config", InstallConfigExample); err != nil {
			t.Fatalf("the list was accepted, its install-config is not: %v", err)
		}
		networks, err := machineNetworks(in.InstallConfig, ic0)
		if err != nil {
			t.Fatalf("the list was accepted, its machine networks are not: %v", err)
		}
		owner := map[netip.Addr]string{}
		for _, n := range nodes {
			if filepath.Base(n.Name) != n.Name || strings.ContainsAny(n.Name, "\n\r /") || n.Name == ".." || n.Name == "" {
				t.Fatalf("accepted node name %q is no single path element", n.Name)
			}
			for _, a := range n.Status.Addresses {
				if a.Type != corev1.NodeInternalIP {
					continue
				}
				ip, err := netip.ParseAddr(a.Address)
				if err != nil {
					t.Fatalf("%s: accepted address %q is no IP address", n.Name, a.Address)
				}
				if o, dup := owner[ip]; dup && o != n.Name {
					t.Fatalf("accepted nodes %s and %s share %s", o, n.Name, ip)
				}
				owner[ip] = n.Name
				inside := false
				for _, p := range networks {
					inside = inside || p.Contains(ip)
				}
				if !inside {
					t.Fatalf("%s: accepted address %s is in no machine network %v", n.Name, ip, networks)
				}
			}
		}
	})
}
