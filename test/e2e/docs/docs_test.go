package docs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/doccheck"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestInstallGuide runs docs/install.md as a reader would, so the guide
// cannot drift from the tool: every shell block marked to run
// (test/doccheck) runs in order, in one working directory, with the vipctl
// built from this tree first on PATH; a non-zero exit, or a file a block
// names that is not there afterwards, fails the test. Every shell block
// must carry a mark, so a new one is either run or says why not.
func TestInstallGuide(t *testing.T) {
	runGuide(t, "docs/install.md")
}

// guideEnv is what a guide's blocks run in.
//
//   - Every block: a fresh working directory holding a link to the
//     repository's examples/ (as a release archive or a checkout has),
//     PATH with vipctl first, HOME empty, KUBECONFIG naming no file.
//   - <!-- doctest: host -->: inside a network namespace of its own, a host
//     of the machine network before installing: one NIC, ens3, with the
//     .250 address of the first IPv4 machine network of cluster.yaml (no
//     br-ex), on a segment no VRRP runs on.
//   - <!-- doctest: cluster -->: KUBECONFIG is an administrator's of an
//     installed cluster: the lab (docs/lab.md) running cluster.yaml on the
//     nodes of nodes.yaml (as written by the blocks before), a real
//     kube-apiserver with manifests/vipctl.yaml applied, the
//     MachineConfig and ClusterVersion CRDs (at the file's
//     spec.openshiftRelease), every node's sidecar, a ready router of the
//     default IngressController on each node, and every VIP held.
type guideEnv struct {
	t          *testing.T
	doc, dir   string
	env        []string
	kubeconfig string
	host       *netlab.Host
}

func runGuide(t *testing.T, doc string) {
	data, err := os.ReadFile(fixture.Repo(doc))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := doccheck.Blocks(data)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	bin := lab.BuildVipctl(t)
	e := &guideEnv{t: t, doc: doc, dir: t.TempDir()}
	if err := os.Symlink(fixture.Repo("examples"), filepath.Join(e.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	e.env = append(os.Environ(),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home, "KUBECONFIG="+filepath.Join(home, "no-cluster-yet"))
	ran := 0
	for _, b := range blocks {
		switch {
		case b.Shell() && !b.Marked:
			t.Errorf("%s:%d: a shell block without a doctest mark: put <!-- doctest --> (or <!-- doctest: cluster -->, <!-- doctest: host -->) before it to run it in %s, or <!-- doctest: skip, REASON -->", doc, b.Line, t.Name())
		case !b.Marked:
		case b.Mark == doccheck.Skip:
			t.Logf("%s:%d: not run: %s", doc, b.Line, b.Arg)
		case b.Mark == doccheck.File:
			if err := os.WriteFile(filepath.Join(e.dir, b.Arg), []byte(b.Text), 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			e.run(b)
			ran++
		}
	}
	if ran == 0 {
		t.Errorf("%s: no block ran: the marks are gone?", doc)
	}
}

// run runs one block where its mark says and fails the test, at once, on
// a non-zero exit or a file it names that is not there: later blocks
// build on this one.
func (e *guideEnv) run(b doccheck.Block) {
	t := e.t
	t.Helper()
	env := e.env
	if b.Mark == doccheck.Cluster {
		env = append(env[:len(env):len(env)], "KUBECONFIG="+e.cluster())
	}
	script := "set -euo pipefail\n" + b.Text
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if b.Mark == doccheck.Host {
		// ip netns exec keeps the environment and the directory.
		cmd = exec.CommandContext(ctx, "ip", "netns", "exec", e.machineHost().NS, "bash", "-c", script)
	} else {
		cmd = exec.CommandContext(ctx, "bash", "-c", script)
	}
	cmd.Dir, cmd.Env = e.dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s:%d (%s, %s):\n%s%s", e.doc, b.Line, orRun(b.Mark), time.Since(start).Round(10*time.Millisecond), b.Text, indent(out))
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("%s:%d: exit %d", e.doc, b.Line, exit.ExitCode())
	case err != nil:
		t.Fatalf("%s:%d: %v", e.doc, b.Line, err)
	}
	for _, f := range namedFiles(b.Text) {
		if _, err := os.Stat(filepath.Join(e.dir, f)); err != nil {
			t.Fatalf("%s:%d: %s is not there after the block: %v", e.doc, b.Line, f, err)
		}
	}
}

func orRun(mark string) string {
	if mark == "" {
		return "run"
	}
	return mark
}

func indent(out []byte) string {
	if len(out) == 0 {
		return ""
	}
	return "  | " + strings.ReplaceAll(strings.TrimSuffix(string(out), "\n"), "\n", "\n  | ") + "\n"
}

// fileWord is a word that names a file or directory of the working
// directory: a relative path ending in a file type the guides hand
// around, or in a slash.
var fileWord = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./-]*(\.ya?ml|\.json|/)$`)

// namedFiles are the files and directories a block's commands name
// (comments aside), which must all exist once it ran.
func namedFiles(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, w := range strings.Fields(line) {
			w = strings.Trim(w, `"'`)
			if fileWord.MatchString(w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// machineHost is the host of the machine network, made at its first use.
func (e *guideEnv) machineHost() *netlab.Host {
	if e.host != nil {
		return e.host
	}
	addr := "198.51.100.250/24"
	if c, err := v1alpha1.Load(filepath.Join(e.dir, "cluster.yaml")); err == nil {
		for _, s := range c.Spec.MachineNetworks {
			if p := netip.MustParsePrefix(s); p.Addr().Is4() {
				a := p.Addr()
				for range 250 {
					a = a.Next()
				}
				addr = netip.PrefixFrom(a, p.Bits()).String()
				break
			}
		}
	}
	e.host = netlab.New(e.t).AddHost("machine", netlab.HostOpts{Iface: "ens3", Addrs: []string{addr}})
	return e.host
}

// cluster starts the installed cluster at its first use and returns an
// administrator's kubeconfig for it.
func (e *guideEnv) cluster() string {
	t := e.t
	t.Helper()
	if e.kubeconfig != "" {
		return e.kubeconfig
	}
	text, err := os.ReadFile(filepath.Join(e.dir, "cluster.yaml"))
	if err != nil {
		t.Fatalf("a cluster block runs before the guide wrote cluster.yaml: %v", err)
	}
	cfg, err := v1alpha1.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cluster.LoadNodeList(filepath.Join(e.dir, "nodes.yaml"), cfg.Spec.VRRP.Interface)
	if err != nil {
		t.Fatalf("a cluster block runs on the nodes of nodes.yaml: %v", err)
	}
	var specs []lab.NodeSpec
	for _, n := range nodes {
		s := lab.NodeSpec{Name: n.Name, ControlPlane: n.ControlPlane, Labels: n.Labels}
		for _, a := range n.Addresses {
			for _, mn := range cfg.Spec.MachineNetworks {
				p := netip.MustParsePrefix(mn)
				switch {
				case !p.Contains(a):
				case a.Is4() && s.Addr == "":
					s.Addr = netip.PrefixFrom(a, p.Bits()).String()
				case a.Is6() && s.Addr6 == "":
					s.Addr6 = netip.PrefixFrom(a, p.Bits()).String()
				}
			}
		}
		specs = append(specs, s)
	}
	kc := lab.StartKube(t, string(text), specs)
	kc.API.InstallCRDs(t, testapiserver.MachineConfigCRD(t), testapiserver.ClusterVersionCRD(t))
	kc.API.SetClusterVersion(t, cfg.Spec.OpenShiftRelease+".3")
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
		for _, in := range cfg.Spec.Ingress {
			n.StartRouter(t, in.Name, in.HealthPort, in.VIPs[0])
		}
		kc.CreateRouterPod(t, n.Name, true)
	}
	// Installed: every VIP held, as vipctl status judges it.
	var last []status.VIPStatus
	lab.WaitFor(t, 60*time.Second, "every VIP of the installed cluster held", func() bool {
		list, err := kc.Admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		last, _ = status.Compute(cfg, list.Items, nil)
		for _, r := range last {
			if r.State != status.StateOK {
				return false
			}
		}
		return len(last) > 0
	})
	e.kubeconfig = filepath.Join(t.TempDir(), "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), e.kubeconfig)
	t.Logf("the installed cluster: %s", fmt.Sprint(last))
	return e.kubeconfig
}
