package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestNodesFromCluster: `vipctl nodes --from-cluster` lists a real
// apiserver's Nodes, as OpenShift fills them (about 20 KB each), under
// their real names and with only what rendering reads; a Node with no
// address yet is left out with a warning; and `vipctl render --nodes`
// takes the list.
func TestNodesFromCluster(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	srv := testapiserver.Start(t)
	admin, err := kubernetes.NewForConfig(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := fixture.OpenShiftNodes(6)
	nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ocp4-x7k2p-worker-2-new00"}})
	for _, n := range nodes {
		n.UID, n.ResourceVersion, n.CreationTimestamp = "", "", metav1.Time{}
		created, err := admin.CoreV1().Nodes().Create(ctx, &n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = n.Status
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, srv.AdminConfig(), kubeconfig)

	code, stdout, stderr := vipctl(t, "nodes", "--from-cluster", "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("vipctl nodes --from-cluster: exit %d\n%s", code, stderr)
	}
	if want := "warning: left out node ocp4-x7k2p-worker-2-new00: status.addresses has no InternalIP or ExternalIP\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	listed, err := cluster.ParseNodeList("nodes.yaml", []byte(stdout), "br-ex")
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var names []string
	for _, n := range listed {
		names = append(names, n.Name)
	}
	var want []string
	for _, n := range nodes[:6] {
		want = append(want, n.Name)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("listed %v, want %v", names, want)
	}
	for _, unread := range []string{"images", "sha256", "machineconfiguration.openshift.io", "conditions"} {
		if strings.Contains(stdout, unread) {
			t.Errorf("the list carries %q, which rendering never reads", unread)
		}
	}

	nodesFile, clusterFile := filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(nodesFile, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clusterFile, []byte(fixture.OpenShiftCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, stdout, stderr := vipctl(t, "render", "-f", clusterFile, "--nodes", nodesFile, "--out-dir", out); code != 0 {
		t.Fatalf("vipctl render --nodes with the list: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, n := range want {
		conf, err := os.ReadFile(filepath.Join(out, "nodes", n, onnode.KeepalivedConfPath))
		if err != nil || !bytes.Contains(conf, []byte("vrrp_instance")) {
			t.Errorf("%s: no keepalived.conf with instances: %v", n, err)
		}
	}
}
