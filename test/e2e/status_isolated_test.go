package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/internal/cli"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/status"
)

// TestStatusIsolatedHolder: against the real apiserver, two nodes publish
// the API VIP, as after a node is cut off the segment (its annotation
// stays, and the node that took over publishes too). While the cut-off
// node's kubelet Lease goes unrenewed, `vipctl status` and its watch say
// isolated and name it, not split-brain; once its Lease is renewed again
// with both still claiming the VIP, it is a split brain.
func TestStatusIsolatedHolder(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	kubeconfig, _ := updateFiles(t, e.api, base)
	ctx := context.Background()
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	leases := e.admin.CoordinationV1().Leases(status.NodeLeaseNamespace)
	renew := func(node string, ago time.Duration) {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now().Add(-ago)}}}
		cur, err := leases.Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			l.ResourceVersion = cur.ResourceVersion
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		} else {
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"master-0", "master-1"} {
		held := v1alpha1.HeldVIPs{{Address: apiVIP, Instance: "api", Since: since.Add(time.Duration(i) * time.Minute)}}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationNodeVIPs: held.String()}}}
		if _, err := e.admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	renew("master-0", 30*time.Second) // cut off 30 s ago: two renewals missed
	renew("master-1", time.Second)

	var out, errOut bytes.Buffer
	code := cli.MainContext(ctx, []string{"status", "--kubeconfig", kubeconfig, "-o", "json"}, cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	var r status.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("status -o json: %v\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if row := apiRow(t, r); row.State != status.StateIsolated || strings.Join(row.Unreachable, ",") != "master-0" || strings.Join(row.Holders, ",") != "master-0,master-1" {
		t.Errorf("status with master-0's Lease 30 s old: %+v", row)
	}
	if code == 0 {
		t.Errorf("status exit 0 with a node away, want non-zero")
	}

	w := watchStatus(t, "--kubeconfig", kubeconfig, "-o", "json")
	frame := func(what string) status.VIPStatus {
		t.Helper()
		var r status.Report
		if err := json.Unmarshal([]byte(w.next(t, what)), &r); err != nil {
			t.Fatal(err)
		}
		return apiRow(t, r)
	}
	if row := frame("the first frame"); row.State != status.StateIsolated {
		t.Fatalf("watch, first frame: %+v", row)
	}
	// master-0 reaches the API again and still claims the VIP: both
	// holders are live, a split brain. Nothing but the Lease changed: the
	// watch finds it on its recheck.
	renew("master-0", 0)
	if row := frame("the split brain"); row.State != status.StateSplitBrain || len(row.Unreachable) != 0 {
		t.Fatalf("watch, after master-0's Lease was renewed: %+v", row)
	}
	if code := w.stop(t); code != 0 {
		t.Errorf("interrupted: exit %d\nstderr:\n%s", code, w.errors())
	}
}
