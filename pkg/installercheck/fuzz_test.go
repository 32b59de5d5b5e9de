package installercheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/test/fixture"
)

// FuzzCrossCheck: any bytes as install-config.yaml and agent-config.yaml
// against examples/compact-ipv4.yaml and examples/nodes/compact.yaml
// (vipctl render --install-config --agent-config --nodes). No input may
// panic; every refusal names a field of one of the files; and files it
// accepts leave OpenShift no load balancer of its own beside vipctl's
// (platform none, or UserManaged without an agent-config before 4.23).
// The seeds are the example installer files, testdata/installer's and
// testdata/bad-input's.
func FuzzCrossCheck(f *testing.F) {
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	f.Add(read(fixture.Repo("examples/installer/agent-install-config.yaml")), read(fixture.Repo("examples/installer/agent-config.yaml")))
	f.Add(read(fixture.Repo("examples/installer/install-config.yaml")), []byte{})
	f.Add(read(fixture.Repo("testdata/installer/dual-stack-install-config.yaml")), read(fixture.Repo("testdata/installer/dual-stack-agent-config.yaml")))
	f.Add(read(fixture.Repo("testdata/installer/pools-only-install-config.yaml")), []byte{})
	bad, _ := filepath.Glob(fixture.Repo("testdata/bad-input/install-config-*.yaml"))
	for _, p := range bad {
		f.Add(read(p), read(fixture.Repo("testdata/bad-input/agent-config-strangers.yaml")))
	}
	c := fixture.Example(f, "compact-ipv4.yaml")
	list, err := cluster.LoadNodeListFile(fixture.Repo("examples/nodes/compact.yaml"), "br-ex")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ic, ac []byte) {
		dir := t.TempDir()
		in := nodelist.Installer{InstallConfig: filepath.Join(dir, "install-config.yaml")}
		if err := os.WriteFile(in.InstallConfig, ic, 0o600); err != nil {
			t.Fatal(err)
		}
		if len(ac) > 0 {
			in.AgentConfig = filepath.Join(dir, "agent-config.yaml")
			if err := os.WriteFile(in.AgentConfig, ac, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		files, err := nodelist.ReadInstaller(in)
		if err != nil {
			return
		}
		errs := Check(Input{Config: c, ConfigPath: "cluster.yaml", Files: files, Nodes: list.Nodes, NodesPath: "nodes.yaml"})
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, in.InstallConfig+": ") && !strings.HasPrefix(e.Field, "cluster.yaml: ") &&
				(in.AgentConfig == "" || !strings.HasPrefix(e.Field, in.AgentConfig+": ")) {
				t.Fatalf("a refusal names no file's field: %v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		if !slices.Equal(files.Platforms, []string{PlatformNone}) &&
			(files.OnPrem == nil || files.OnPrem.LoadBalancerType != UserManaged || in.AgentConfig != "") {
			t.Fatalf("accepted platform %v with %+v (agent-config %t): OpenShift runs a load balancer of its own", files.Platforms, files.OnPrem, in.AgentConfig != "")
		}
	})
}
