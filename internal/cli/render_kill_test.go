package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/test/fixture"
)

// vipctlArgsEnv makes this test binary vipctl (TestMain): the arguments,
// a JSON list.
const vipctlArgsEnv = "VIPCTL_TEST_PROCESS_ARGS"

// TestMain runs the tests, or, when another test starts this binary with
// vipctlArgsEnv set, is vipctl itself: a real process that can be killed
// (TestRenderKilledMidWrite), with no test of its own to skip.
func TestMain(m *testing.M) {
	args, ok := os.LookupEnv(vipctlArgsEnv)
	if !ok {
		os.Exit(m.Run())
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, vipctlArgsEnv+":", err)
		os.Exit(2)
	}
	os.Exit(Main(argv, StdStreams()))
}

// vipctlProcess is `vipctl args...` as a child process.
func vipctlProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	argv, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), vipctlArgsEnv+"="+string(argv))
	return cmd
}

// TestRenderKilledMidWrite: `vipctl render` killed (SIGKILL) while it
// writes leaves the previous output exactly as it was, and the next run
// removes the half-written tree the killed one left beside it (issue 47:
// up to 578 MB of .<out>.new-* stayed for good).
func TestRenderKilledMidWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodesFile, clusterFile, out := filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "out")
	// Enough nodes that writing their files takes a while; their routers
	// on three infra nodes, so each file stays small.
	writeNodeList(t, nodesFile, 2000)
	writeCluster := func(apiVIP string) {
		t.Helper()
		writeClusterFile(t, clusterFile, apiVIP, true)
	}
	args := []string{"render", "-f", clusterFile, "--nodes", nodesFile, "--out-dir", out}

	writeCluster("2001:db8:1::5")
	if b, err := vipctlProcess(t, args...).CombinedOutput(); err != nil {
		t.Fatalf("first render: %v\n%s", err, b)
	}
	before := digest(t, out)

	// The second render, of another API VIP, killed once it has begun
	// to write the nodes' files.
	writeCluster("2001:db8:1::15")
	cmd := vipctlProcess(t, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tmp, err := awaitNodesWritten(dir, exited)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Fatalf("render ended by %v, not by the kill: it finished before it could be killed mid-write", err)
	}
	if after := digest(t, out); after != before {
		t.Errorf("the killed render changed %s", out)
	}
	if _, err := os.Lstat(tmp); err != nil {
		t.Fatalf("the killed render left no tree behind (%v): nothing for the next run to clean", err)
	}

	if b, err := vipctlProcess(t, args...).CombinedOutput(); err != nil {
		t.Fatalf("render after the kill: %v\n%s", err, b)
	}
	if d := digest(t, out); d == before {
		t.Errorf("the render after the kill did not replace %s", out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s left beside the output after the next run", e.Name())
		}
	}
}

// writeNodeList writes a node list of n nodes: three control-plane
// nodes, three infra nodes, the rest workers, on fixture.OpenShiftNetwork.
func writeNodeList(t *testing.T, path string, n int) {
	t.Helper()
	var nodes []corev1.Node
	for i := 0; i < n; i++ {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%04d", i), Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("2001:db8:1::a:%x", i)}}}}
		switch {
		case i < 3:
			node.Name, node.Labels = fmt.Sprintf("master-%d", i), map[string]string{"node-role.kubernetes.io/master": ""}
		case i < 6:
			node.Labels["node-role.kubernetes.io/infra"] = ""
		}
		nodes = append(nodes, node)
	}
	list, err := cluster.MarshalNodeList(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, list, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeClusterFile writes fixture.OpenShiftCluster with apiVIP, and with
// infraRouters the default IngressController's routers on the infra
// nodes of writeNodeList.
func writeClusterFile(t *testing.T, path, apiVIP string, infraRouters bool) {
	t.Helper()
	c := fixture.OpenShiftCluster
	if infraRouters {
		c = strings.Replace(c, `ingress: [{name: default, vips: ["2001:db8:1::6"]}]`,
			`ingress: [{name: default, vips: ["2001:db8:1::6"], nodeSelector: {node-role.kubernetes.io/infra: ""}}]`, 1)
	}
	c = strings.Replace(c, `"2001:db8:1::5"`, `"`+apiVIP+`"`, 1)
	if (infraRouters && !strings.Contains(c, "nodeSelector: {node-role.kubernetes.io/infra")) || !strings.Contains(c, apiVIP) {
		t.Fatal("fixture.OpenShiftCluster changed; adjust this test")
	}
	if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

// awaitNodesWritten waits until a render building in dir has written
// files of nodes into its new tree (.out.new-*/nodes/), and returns that
// tree.
func awaitNodesWritten(dir string, exited <-chan error) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return "", fmt.Errorf("render ended (%v) before it wrote the nodes' files", err)
		default:
		}
		matches, _ := filepath.Glob(filepath.Join(dir, ".out.new-*", "nodes", "*"))
		if len(matches) > 0 {
			return filepath.Dir(filepath.Dir(matches[0])), nil
		}
		time.Sleep(time.Millisecond)
	}
	return "", fmt.Errorf("no render wrote into %s/.out.new-*/nodes/ within 2 minutes", dir)
}

// digest is one hash over every file under dir: its path, mode and bytes.
func digest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s %v\n", rel, info.Mode())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
