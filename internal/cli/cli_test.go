package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/version"
	"github.com/vipctl/vipctl/test/golden"
)

type result struct {
	code           int
	stdout, stderr string
}

// run executes the real root command, as the binary would, into buffers.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func repo(path string) string { return filepath.Join("..", "..", path) }

// TestCLIGolden pins the exact output and exit code of each command line.
func TestCLIGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"vr-ids-ostest", []string{"vr-ids", "ostest"}, 0},
		{"vr-ids-cnf10", []string{"vr-ids", "cnf10"}, 0},
		{"vr-ids-cnf11-known-cnf10", []string{"vr-ids", "cnf11", "--known", "cnf10"}, ExitFinding},
		{"vr-ids-file-shards", []string{"vr-ids", "-f", repo("examples/ingress-shards.yaml")}, 0},
		{"vr-ids-file-json", []string{"vr-ids", "-f", repo("examples/multicast-fast.yaml"), "-o", "json"}, 0},
		{"vr-ids-inventory", []string{"vr-ids", "-f", repo("examples/compact-ipv4.yaml"), "--inventory", repo("testdata/inventory.yaml"), "--known", "ostest2"}, 0},
		{"vr-ids-inventory-yaml", []string{"vr-ids", "cnf11", "--inventory", repo("testdata/inventory.yaml"), "-o", "yaml"}, ExitFinding},
		{"vr-ids-bad-name", []string{"vr-ids", "Bad_Name"}, 1},
		{"vr-ids-no-name", []string{"vr-ids"}, 1},
		{"vr-ids-name-mismatch", []string{"vr-ids", "other", "-f", repo("examples/compact-ipv4.yaml")}, 1},
		// Beside OpenShift's own keepalived: its two IDs, and the pools'
		// clear of them.
		{"vr-ids-pools-only", []string{"vr-ids", "-f", repo("examples/pools-only.yaml")}, 0},
		{"vr-ids-pools-only-json", []string{"vr-ids", "-f", repo("examples/pools-only.yaml"), "-o", "json"}, 0},
		{"validate-ok", []string{"validate", "-f", repo("examples/compact-ipv4.yaml")}, 0},
		{"validate-defaults-yaml", []string{"validate", "-f", repo("examples/dual-stack.yaml"), "-o", "yaml"}, 0},
		{"validate-invalid", []string{"validate", "-f", repo("testdata/invalid-cluster.yaml")}, 1},
		{"validate-nodes-own-interface", []string{"validate", "-f", repo("examples/own-interface.yaml"), "--nodes", repo("examples/nodes/dmz.yaml")}, 0},
		{"validate-nodes-missing-interface", []string{"validate", "-f", repo("examples/own-interface.yaml"), "--nodes", repo("testdata/bad-input/nodes-without-dmz.yaml")}, 1},
		// Bad input that used to be accepted: each refused with its field
		// path (testdata/bad-input says why in each file's comment).
		{"validate-two-documents", []string{"validate", "-f", repo("testdata/bad-input/two-documents.yaml")}, 1},
		{"validate-instances-zero", []string{"validate", "-f", repo("testdata/bad-input/instances-zero.yaml")}, 1},
		{"validate-vip-network-address", []string{"validate", "-f", repo("testdata/bad-input/vip-network-address.yaml")}, 1},
		{"validate-pool-broadcast", []string{"validate", "-f", repo("testdata/bad-input/pool-broadcast.yaml")}, 1},
		{"validate-load-balancer-class", []string{"validate", "-f", repo("testdata/bad-input/load-balancer-class.yaml")}, 1},
		{"validate-avoid-openshift-api-id", []string{"validate", "-f", repo("testdata/bad-input/avoid-openshift-api-id.yaml")}, 1},
		{"validate-pools-only-with-vips", []string{"validate", "-f", repo("testdata/bad-input/pools-only-with-vips.yaml")}, 1},
		{"validate-pools-only-pin-openshift-id", []string{"validate", "-f", repo("testdata/bad-input/pools-only-pin-openshift-id.yaml")}, 1},
		{"validate-pools-only", []string{"validate", "-f", repo("examples/pools-only.yaml")}, 0},
		{"validate-api-int", []string{"validate", "-f", repo("testdata/bad-input/api-int.yaml")}, 1},
		{"vr-ids-api-int", []string{"vr-ids", "-f", repo("examples/api-int.yaml")}, 0},
		{"render-node-addresses", []string{"render", "-f", repo("testdata/bad-input/node-addresses.yaml"), "--out-dir", "never-written", "--nodes", repo("examples/nodes/compact.yaml")}, 1},
		{"validate-missing-file", []string{"validate", "-f", "does-not-exist.yaml"}, 1},
		{"bad-output-format", []string{"vr-ids", "ostest", "-o", "xml"}, 1},
		// Refused before any daemon starts or packet is sent.
		{"bootstrap-no-spec", []string{"bootstrap", "-f", repo("examples/compact-ipv4.yaml"), "--nodes", repo("examples/nodes/compact.yaml")}, 1},
		{"bootstrap-bad-address", []string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--bootstrap-address", "198.51.100.300"}, 1},
		{"bootstrap-no-nodes", []string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml")}, 1},
		{"dns-check-invalid", []string{"dns", "check", "-f", repo("testdata/invalid-cluster.yaml"), "--server", "198.51.100.53"}, 1},
		{"dns-check-pools-only", []string{"dns", "check", "-f", repo("examples/pools-only.yaml"), "--server", "198.51.100.53"}, 1},
		{"dns-check-bad-server", []string{"dns", "check", "-f", repo("examples/compact-ipv4.yaml"), "--server", "ns1.example.test"}, 1},
		{"preflight-invalid", []string{"preflight", "-f", repo("testdata/invalid-cluster.yaml")}, 1},
		// Fails before anything is written, so the directory is never made.
		{"render-unsupported-release", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--openshift-release", "4.12"}, 1},
		{"nodes-install-config", []string{"nodes", "--install-config", repo("examples/installer/install-config.yaml")}, 0},
		{"nodes-agent-config-json", []string{"nodes", "--install-config", repo("examples/installer/agent-install-config.yaml"), "--agent-config", repo("examples/installer/agent-config.yaml"), "-o", "json"}, 0},
		{"nodes-dhcp-hosts", []string{"nodes", "--install-config", repo("testdata/bad-input/install-config-dhcp.yaml")}, 1},
		{"nodes-agent-config-alone", []string{"nodes", "--agent-config", repo("examples/installer/agent-config.yaml")}, 1},
		{"nodes-no-source", []string{"nodes"}, 1},
		// Refused before the cluster or the node is read.
		{"diagnose-no-output", []string{"diagnose"}, 1},
		{"diagnose-output-exists", []string{"diagnose", "-o", repo("examples/compact-ipv4.yaml")}, 1},
		{"diagnose-local-with-node", []string{"diagnose", "--local", "master-0", "-o", "never-written.tar.gz"}, 1},
		{"diagnose-local-include", []string{"diagnose", "--local", "--include", "node.tar.gz", "-o", "never-written.tar.gz"}, 1},
		{"render-newer-release", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--openshift-release", "4.23"}, 1},
		// Node lists and installer files checked like a cluster file
		// (issue 47): every problem with its file and field path.
		{"validate-nodes-one-address", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--nodes", repo("testdata/bad-input/nodes-one-address.yaml")}, 1},
		{"render-nodes-bad-names", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--nodes", repo("testdata/bad-input/nodes-bad-names.yaml")}, 1},
		{"render-nodes-empty", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--nodes", repo("testdata/bad-input/nodes-empty.yaml")}, 1},
		{"validate-nodes-list-of-services", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--nodes", repo("testdata/bad-input/nodes-list-of-services.yaml")}, 1},
		{"validate-nodes-wrong-kinds", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--nodes", repo("testdata/bad-input/nodes-wrong-kinds.yaml")}, 1},
		{"validate-nodes-off-network", []string{"validate", "-f", repo("examples/bgp-two-racks.yaml"), "--nodes", repo("testdata/bad-input/nodes-off-network.yaml")}, 1},
		{"update-nodes-bad-names", []string{"update", "-f", repo("examples/compact-ipv4.yaml"), "--kubeconfig", "never-read", "--nodes", repo("testdata/bad-input/nodes-bad-names.yaml")}, 1},
		{"bootstrap-nodes-one-address", []string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("testdata/bad-input/nodes-one-address.yaml")}, 1},
		{"nodes-install-config-host-bits", []string{"nodes", "--install-config", repo("testdata/bad-input/install-config-host-bits.yaml")}, 1},
		{"nodes-install-config-one-address", []string{"nodes", "--install-config", repo("testdata/bad-input/install-config-one-address.yaml")}, 1},
		// The installer's files are the source of truth (issue 48): a
		// cluster file, or node list, that disagrees with them is refused
		// with the field of each file.
		{"validate-install-config", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--install-config", repo("examples/installer/install-config.yaml")}, 0},
		{"validate-agent-config", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--install-config", repo("examples/installer/agent-install-config.yaml"), "--agent-config", repo("examples/installer/agent-config.yaml"), "--nodes", repo("examples/nodes/compact.yaml")}, 0},
		{"validate-install-config-default-lb", []string{"validate", "-f", repo("examples/compact-ipv4.yaml"), "--install-config", repo("testdata/bad-input/install-config-default-lb.yaml")}, 1},
		{"validate-install-config-pools-only", []string{"validate", "-f", repo("examples/pools-only.yaml"), "--install-config", repo("testdata/installer/pools-only-install-config.yaml")}, 0},
		{"validate-install-config-other-cluster", []string{"validate", "-f", repo("examples/dual-stack.yaml"), "--install-config", repo("examples/installer/install-config.yaml")}, 1},
		{"validate-agent-user-managed", []string{"validate", "-f", repo("examples/dual-stack.yaml"), "--install-config", repo("testdata/installer/dual-stack-install-config.yaml"), "--agent-config", repo("testdata/installer/dual-stack-agent-config.yaml")}, 1},
		{"render-agent-config-strangers", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--install-config", repo("examples/installer/agent-install-config.yaml"), "--agent-config", repo("testdata/bad-input/agent-config-strangers.yaml"), "--nodes", repo("examples/nodes/compact.yaml")}, 1},
		{"render-agent-user-managed-release", []string{"render", "-f", repo("examples/dual-stack.yaml"), "--out-dir", "never-written", "--openshift-release", "4.22", "--install-config", repo("testdata/installer/dual-stack-install-config.yaml"), "--agent-config", repo("testdata/installer/dual-stack-agent-config.yaml")}, 1},
		{"render-agent-config-alone", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--agent-config", repo("examples/installer/agent-config.yaml")}, 1},
		// bootstrap's flags, every one refused before anything starts.
		{"bootstrap-bad-flags", []string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--yield-after", "-1s", "--grace", "0s", "--bootstrap-address", "0.0.0.0", "--dir", ""}, 1},
		{"bootstrap-address-api-vip", []string{"bootstrap", "-f", repo("examples/day1-bootstrap.yaml"), "--nodes", repo("examples/nodes/compact.yaml"), "--bootstrap-address", "198.51.100.5"}, 1},
		// The cluster file's own checks added for issue 47 (classes 1, 3,
		// 5, 6 and 10); each file says why it is bad.
		{"validate-ports-taken", []string{"validate", "-f", repo("testdata/bad-input/ports-taken.yaml")}, 1},
		{"validate-internal-allowed-internet", []string{"validate", "-f", repo("testdata/bad-input/internal-allowed-internet.yaml")}, 1},
		{"validate-external-ips-open", []string{"validate", "-f", repo("testdata/bad-input/external-ips-open.yaml")}, 1},
		{"validate-bgp-peers", []string{"validate", "-f", repo("testdata/bad-input/bgp-peers.yaml")}, 1},
		{"validate-names-too-long", []string{"validate", "-f", repo("testdata/bad-input/names-too-long.yaml")}, 1},
		{"validate-kinds-wrong", []string{"validate", "-f", repo("testdata/bad-input/kinds-wrong.yaml")}, 1},
		{"render-external-ips-open", []string{"render", "-f", repo("testdata/bad-input/external-ips-open.yaml"), "--out-dir", "never-written"}, 1},
		// Every command's flags and arguments, refused up front naming
		// the flag (issue 47, class 7); update's refusals name the file.
		{"update-namespace-empty", []string{"update", "-f", repo("examples/compact-ipv4.yaml"), "--namespace", ""}, 1},
		{"update-namespace-invalid", []string{"update", "-f", repo("examples/compact-ipv4.yaml"), "--namespace", "Vipctl_System"}, 1},
		{"status-namespace-empty", []string{"status", "--namespace", ""}, 1},
		{"diagnose-bad-namespace-and-node", []string{"diagnose", "-o", "never-written.tar.gz", "--namespace", "", "../master-0"}, 1},
		{"allocator-bad-flags", []string{"allocator", "--id", "allocator-0", "--namespace", "vipctl/x", "--lease-duration", "5s"}, 1},
		{"runtimecfg-bad-flags", []string{"runtimecfg", "--once", "--node-name", "Master_0", "--namespace", "", "--debounce", "-1s"}, 1},
		{"dns-check-server-port-zero", []string{"dns", "check", "-f", repo("examples/compact-ipv4.yaml"), "--server", "198.51.100.53:0"}, 1},
		{"dns-check-timeout", []string{"dns", "check", "-f", repo("examples/compact-ipv4.yaml"), "--server", "198.51.100.53", "--timeout", "-1s"}, 1},
		{"dns-check-timeout-zero", []string{"dns", "check", "-f", repo("examples/compact-ipv4.yaml"), "--timeout", "0s"}, 1},
		{"vr-ids-inventory-empty", []string{"vr-ids", "ostest", "--inventory", repo("testdata/bad-input/inventory-empty.yaml")}, 1},
		{"vr-ids-inventory-cluster-file", []string{"vr-ids", "ostest", "--inventory", repo("examples/compact-ipv4.yaml")}, 1},
		{"vr-ids-listen-bad", []string{"vr-ids", "ostest", "--listen", "br-ex;reboot"}, 1},
		{"drain-empty", []string{"drain", ""}, 1},
		{"undrain-empty", []string{"undrain", ""}, 1},
		{"drain-bad-timeout", []string{"drain", "master-0", "--wait", "--timeout", "0s"}, 1},
		{"preflight-bad-flags", []string{"preflight", "-f", repo("examples/compact-ipv4.yaml"), "--interface", "br ex", "--timeout", "-1s"}, 1},
		{"diagnose-local-bad-node-name", []string{"diagnose", "--local", "--node-name", "master-0/..", "-o", "never-written.tar.gz"}, 1},
		// A flag that names a file, given as "": not "open : no such
		// file", nor --nodes "" rendering as if it were absent.
		{"validate-file-empty", []string{"validate", "-f", ""}, 1},
		{"render-nodes-flag-empty", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "", "--nodes", ""}, 1},
		{"vr-ids-inventory-flag-empty", []string{"vr-ids", "ostest", "--inventory", ""}, 1},
		{"bootstrap-flags-empty", []string{"bootstrap", "-f", "", "--nodes", ""}, 1},
		{"render-interface-bad", []string{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "never-written", "--nodes", repo("examples/nodes/compact.yaml"), "--interface", "br-ex\n}\nvrrp_script x {"}, 1},
		{"allocator-bad-listen", []string{"allocator", "--id", "allocator-0", "--listen", "9446", "--metrics-listen", ":0"}, 1},
		{"runtimecfg-bad-listen", []string{"runtimecfg", "--once", "--node-name", "master-0", "--listen", "127.0.0.1:99999", "--metrics-listen", "ns1.example.test:9449"}, 1},
		{"runtimecfg-bad-wire", []string{"runtimecfg", "--once", "--node-name", "master-0", "--wire-interval", "100ms", "--wire-rate", "0"}, 1},
		{"runtimecfg-bad-profiles", []string{"runtimecfg", "--once", "--node-name", "master-0", "--cpu-profile", "testdata", "--heap-profile", "no-such-directory/heap.pprof"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			// Paths in messages depend on where the test runs from.
			out := strings.ReplaceAll(fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr), "../../", "")
			golden.Assert(t, tc.name, []byte(out))
		})
	}
}

// TestVRIDsCompatibleOutput: the first two lines must stay byte for byte
// what OpenShift's `baremetal-runtimecfg vr-ids` prints.
func TestVRIDsCompatibleOutput(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"cnf10":  "APIVirtualRouterID: 147\nIngressVirtualRouterID: 2\n",
		"cnf11":  "APIVirtualRouterID: 228\nIngressVirtualRouterID: 147\n",
		"ostest": "APIVirtualRouterID: 14\nIngressVirtualRouterID: 93\n",
	} {
		if r := run(t, "vr-ids", name); r.code != 0 || r.stdout != want {
			t.Errorf("vr-ids %s = %q (exit %d), want %q", name, r.stdout, r.code, want)
		}
	}
}

func TestVRIDsClashReport(t *testing.T) {
	t.Parallel()
	r := run(t, "vr-ids", "cnf11", "--known", "cnf10", "-o", "json")
	if r.code != ExitFinding {
		t.Fatalf("exit %d, want %d; stderr %s", r.code, ExitFinding, r.stderr)
	}
	var rep struct {
		Clashes           []string         `json:"clashes"`
		ProposedOverrides map[string]uint8 `json:"proposedOverrides"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := "clash: IngressVirtualRouterID 147 also used by cluster cnf10 (api)"
	if len(rep.Clashes) != 1 || rep.Clashes[0] != want {
		t.Errorf("clashes = %q, want [%q]", rep.Clashes, want)
	}
	id, ok := rep.ProposedOverrides["ingress"]
	if !ok || id == 147 || id == 2 || id == 228 {
		t.Errorf("proposed overrides %v: want a new ingress ID clear of 147, 2 and 228", rep.ProposedOverrides)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	t.Parallel()
	r := run(t, "version", "-o", "json")
	var v version.Info
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Version == "" || v.GoVersion == "" {
		t.Errorf("version -o json = %q, exit %d, err %v", r.stdout, r.code, err)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := run(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "vipctl") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.stdout))
		}
	}
}

// treeDigest summarises a directory: every path, mode and content.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestRenderWritesLayoutAtomically(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", out, "--nodes", repo("examples/nodes/compact.yaml"))
	if r.code != 0 {
		t.Fatalf("render: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"machineconfigs/50-vipctl-master.yaml",
		"machineconfigs/50-vipctl-worker.yaml",
		"nodes/master-0/etc/vipctl-keepalived/keepalived.conf",
		"nodes/master-0/etc/vipctl-haproxy/haproxy.cfg",
		"nodes/master-2/etc/vipctl/scripts/check-http.sh",
	} {
		if _, err := os.Stat(filepath.Join(out, want)); err != nil {
			t.Errorf("missing %s: %v", want, err)
		}
	}
	st, err := os.Stat(filepath.Join(out, "nodes/master-2/etc/vipctl/scripts/check-http.sh"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("check script mode = %v, %v; want 0755", st.Mode(), err)
	}
	before := treeDigest(t, out)

	// A bad file, a bad node list, or a config that cannot render for these
	// nodes: each fails with a clear error and leaves the tree untouched.
	for _, bad := range [][]string{
		{"render", "-f", repo("testdata/invalid-cluster.yaml"), "--out-dir", out},
		{"render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", out, "--nodes", repo("testdata/inventory.yaml")},
		{"render", "-f", repo("examples/pools-node-groups.yaml"), "--out-dir", out, "--nodes", repo("examples/nodes/compact.yaml")},
	} {
		r := run(t, bad...)
		if r.code == 0 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want a failure with a message", bad, r.code, r.stderr)
		}
		if after := treeDigest(t, out); after != before {
			t.Errorf("%v changed the output directory despite failing", bad)
		}
	}

	// A second good render replaces the tree as a whole.
	r = run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", out)
	if r.code != 0 {
		t.Fatalf("re-render: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "nodes")); !os.IsNotExist(err) {
		t.Errorf("nodes/ from the previous render survived a render without --nodes: %v", err)
	}
}

// TestRenderOpenShiftRelease: the MachineConfigs carry the spec of
// --openshift-release, else of spec.openshiftRelease, else of the oldest
// supported release; the flag is recorded in the config the cluster gets.
func TestRenderOpenShiftRelease(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile(repo("examples/compact-ipv4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for419 := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(for419, bytes.Replace(example, []byte("\nspec:\n"), []byte("\nspec:\n  openshiftRelease: \"4.19\"\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, flag string
		spec, release    string
	}{
		{"default", repo("examples/compact-ipv4.yaml"), "", "3.4.0", "4.14"},
		{"field", for419, "", "3.5.0", "4.19"},
		{"flag", repo("examples/compact-ipv4.yaml"), "4.22", "3.5.0", "4.22"},
		{"flag over field", for419, "4.18", "3.4.0", "4.18"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"render", "-f", tc.file, "--out-dir", out}
			if tc.flag != "" {
				args = append(args, "--openshift-release", tc.flag)
			}
			if r := run(t, args...); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			for _, role := range []string{"master", "worker"} {
				data, err := os.ReadFile(filepath.Join(out, "machineconfigs", "50-vipctl-"+role+".yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if want := "version: " + tc.spec + "\n"; !strings.Contains(string(data), want) {
					t.Errorf("%s MachineConfig has no %q", role, want)
				}
			}
			data, err := os.ReadFile(filepath.Join(out, "manifests", "vipctl.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if want := `openshiftRelease: "` + tc.release + `"`; !strings.Contains(string(data), want) {
				t.Errorf("the ConfigMap does not say %s", want)
			}
		})
	}
}

func TestRenderRefusesForeignDirectory(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "precious.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", out)
	if r.code == 0 || !strings.Contains(r.stderr, "was not written by vipctl render") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(out, "precious.txt")); err != nil || string(data) != "mine" {
		t.Errorf("foreign file touched: %q %v", data, err)
	}
}

// TestRenderOldOutputFlag: -o, which names an output format in every other
// command, still names render's directory for one release, with a warning
// on stderr; given with --out-dir it must agree.
func TestRenderOldOutputFlag(t *testing.T) {
	t.Parallel()
	const warning = "warning: render -o/--output-dir is deprecated and goes in the next release: use --out-dir (-o will be the output format, as in the other commands)\n"
	for _, flag := range []string{"-o", "--output-dir"} {
		out := filepath.Join(t.TempDir(), "out")
		r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), flag, out)
		// After it only the development image's warning (TestRenderImageWarningGolden)
		// and 4.14's reboots (TestRenderNodeDisruptionPolicy).
		rest, deprecated := strings.CutPrefix(r.stderr, warning)
		if r.code != 0 || !deprecated || !strings.HasPrefix(rest, "warning: spec.images.") || strings.Count(rest, "\n") != 2 || r.stdout != "wrote 11 files to "+out+"\n" {
			t.Errorf("render %s: exit %d\nstdout:\n%s\nstderr:\n%s", flag, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(out, "manifests", "vipctl.yaml")); err != nil {
			t.Errorf("render %s wrote nothing: %v", flag, err)
		}
	}
	r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", "a", "-o", "b")
	if want := "error: --out-dir a and -o b name different directories: use --out-dir alone\n"; r.code != 1 || r.stderr != want {
		t.Errorf("--out-dir and -o apart: exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	if r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml")); r.code != 1 || r.stderr != "error: required flag \"out-dir\" not set\n" {
		t.Errorf("no directory: exit %d, stderr %q", r.code, r.stderr)
	}
}
