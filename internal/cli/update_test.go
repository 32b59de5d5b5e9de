package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFile puts a copy of the repository file src in a temp dir, for
// commands that may rewrite it.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(repo(src))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestNoKubeconfig: each command that needs a cluster and finds no way to
// one says which flag or variable to set, instead of client-go's advice.
// Not parallel: it sets HOME and KUBECONFIG for the whole process.
func TestNoKubeconfig(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("HOME", empty)
	// Not in a pod, even when the tests run in one.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	file := copyFile(t, "examples/pools-node-groups.yaml")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const help = "pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config (in a pod: the in-cluster service account is used)"
	missing := filepath.Join(empty, "config")
	for _, env := range []struct{ kubeconfig, want string }{
		{"", "error: no kubeconfig: " + help + "\n"},
		{missing, "error: no kubeconfig: KUBECONFIG=" + missing + " names no file; " + help + "\n"},
	} {
		t.Setenv("KUBECONFIG", env.kubeconfig)
		for _, args := range [][]string{
			{"status"},
			{"diagnose", "-o", filepath.Join(empty, "bundle.tar.gz")},
			{"update", "-f", file, "--add-pool", "extra=198.51.100.64/27"},
			{"allocator", "--id", "allocator-0"},
			{"runtimecfg", "--node-name", "master-0", "--config", filepath.Join(empty, "cluster.yaml"), "--listen", ""},
		} {
			r := run(t, args...)
			// runtimecfg first logs that it has no static files to render.
			stderr := r.stderr
			if i := strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n"); args[0] == "runtimecfg" && i >= 0 {
				stderr = stderr[i+1:]
			}
			if r.code != 1 || stderr != env.want {
				t.Errorf("KUBECONFIG=%q vipctl %s: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", env.kubeconfig, strings.Join(args, " "), r.code, r.stderr, env.want)
			}
		}
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Errorf("update rewrote %s although it reached no cluster", file)
	}
}

// TestUpdateRefusedEditsWriteNothing: a quick edit that cannot be made, or
// makes the config invalid, fails before any cluster is contacted, with
// the file and the field path or flag, and leaves the file as it was.
func TestUpdateRefusedEditsWriteNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		args []string
		want string
	}{
		{"pkg/update/testdata/edits/commented.yaml", []string{"--add-pool", "extra=198.51.100.160/28"},
			"error: FILE: 1 invalid field(s):\n  spec.servicePools[2].addresses[0]: Invalid value: \"198.51.100.160/28\": overlaps spec.servicePools[0].addresses[0]\n"},
		{"pkg/update/testdata/edits/commented.yaml", []string{"--set-pool", "nope=198.51.100.64/27"},
			"error: FILE: --set-pool \"nope=198.51.100.64/27\": no pool nope\n"},
		{"pkg/update/testdata/edits/commented.yaml", []string{"--set-pool-mode", "rack-a=bgp"},
			"error: FILE: 1 invalid field(s):\n  spec.bgp: Required value: spec.servicePools[0] has mode bgp: name the nodes' ASN and their peers\n"},
		{"pkg/update/testdata/edits/two-documents.yaml", []string{"--add-pool", "extra=198.51.100.64/27"},
			"error: FILE: the file holds more than one YAML document; quick edits need the ClusterVIPs alone\n"},
	}
	for _, tc := range cases {
		file := copyFile(t, tc.file)
		before, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"update", "-f", file, "--kubeconfig", filepath.Join(t.TempDir(), "unused")}, tc.args...)
		r := run(t, args...)
		// The refusal names the file (issue 47).
		if want := strings.ReplaceAll(tc.want, "FILE", file); r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and:\n%s", tc.args, r.code, r.stdout, r.stderr, want)
		}
		if after, _ := os.ReadFile(file); string(after) != string(before) {
			t.Errorf("%v rewrote the file", tc.args)
		}
	}
}
