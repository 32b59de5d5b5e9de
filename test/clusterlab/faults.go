package clusterlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
)

// revisionAnnotation marks a static pod's manifest written again by
// RestartStaticPod, so the new pod can be told from the old.
const revisionAnnotation = "lab.vipctl.io/revision"

// RestartStaticPod makes the node's kubelet replace one of its static
// pods, as an OpenShift operator's new revision of a control-plane pod
// does: the manifest is written again with a new annotation, the kubelet
// stops the old pod (SIGTERM, then its grace period) and starts the new
// one. It returns once the new pod is Ready.
func (c *Cluster) RestartStaticPod(t testing.TB, n *Node, pod string) {
	t.Helper()
	data, err := n.ReadFile(ManifestPath(pod))
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s: %s: %v", n.Name, ManifestPath(pod), err)
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	revision := time.Now().UTC().Format(time.RFC3339Nano)
	p.Annotations[revisionAnnotation] = revision
	if data, err = yaml.Marshal(&p); err != nil {
		t.Fatal(err)
	}
	if err := n.WriteFile(ManifestPath(pod), 0o644, data); err != nil {
		t.Fatal(err)
	}
	if !lab.WaitUntil(3*time.Minute, func() bool {
		got, err := n.Pod(t.Context(), pod)
		return err == nil && got != nil && got.Annotations[revisionAnnotation] == revision && kubeletlab.PodReady(got)
	}) {
		c.DumpLogs()
		fatalf(t, "%s: the new revision of %s not Ready within 3m", n.Name, pod)
	}
}

// Lose takes the node off the network as a dead node leaves it: its
// switch port drops off the segment, and the node itself notices nothing
// (its daemons keep running, its keepalived still believes it is MASTER).
func (n *Node) Lose() { n.Host.LinkDown() }

// Return puts a lost node back on its segment.
func (n *Node) Return() { n.Host.LinkUp() }

// Settle waits until the cluster serves as after Start: every node
// Ready, the workloads available, every VIP answering the client, and
// `vipctl status` finding every VIP held exactly once.
func (c *Cluster) Settle(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	c.WaitNodesReady(t, time.Until(deadline))
	c.WaitServing(t, time.Until(deadline))
	var out string
	if !lab.WaitUntil(time.Until(deadline), func() bool {
		var err error
		out, err = c.Vipctl("status", "-f", c.ConfigPath)
		return err == nil
	}) {
		c.DumpLogs()
		fatalf(t, "vipctl status not healthy within %s:\n%s\n%s", timeout, out, c.ExplainVIPs(t))
	}
}

// etcdStatus is what an etcd member's gateway answers at
// /v3/maintenance/status: its own member ID and its leader's (uint64s,
// which the gateway writes as strings).
type etcdStatus struct {
	Header struct {
		MemberID json.Number `json:"member_id"`
	} `json:"header"`
	Leader json.Number `json:"leader"`
}

// etcdCall posts body to path on the node's etcd client port (the v3
// JSON gateway), from the client's namespace.
func (c *Cluster) etcdCall(n *Node, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := callCtx()
	defer cancel()
	url := fmt.Sprintf("http://%s/v3/maintenance/%s", net.JoinHostPort(n.Spec.IP4, strconv.Itoa(etcdClientPort)), path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := c.httpClient(RequestTimeout).Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(out)
}

// MoveEtcdLeader makes the node's etcd member the leader of the
// three-member cluster (etcd's own leadership transfer, asked of the
// current leader), so a scenario can lose the leader with the node.
func (c *Cluster) MoveEtcdLeader(t testing.TB, to *Node) {
	t.Helper()
	var target etcdStatus
	if err := c.etcdCall(to, "status", struct{}{}, &target); err != nil {
		t.Fatalf("etcd status of %s: %v", to.Name, err)
	}
	if target.Leader == target.Header.MemberID {
		return
	}
	var leader *Node
	for _, m := range c.Masters() {
		var st etcdStatus
		if err := c.etcdCall(m, "status", struct{}{}, &st); err == nil && st.Header.MemberID == target.Leader {
			leader = m
		}
	}
	if leader == nil {
		t.Fatalf("no control-plane node's etcd member is the leader %s", target.Leader)
	}
	if err := c.etcdCall(leader, "transfer-leadership", map[string]string{"targetID": target.Header.MemberID.String()}, nil); err != nil {
		t.Fatalf("moving etcd's leader from %s to %s: %v", leader.Name, to.Name, err)
	}
	lab.WaitFor(t, 30*time.Second, to.Name+"'s etcd member leading", func() bool {
		var st etcdStatus
		return c.etcdCall(to, "status", struct{}{}, &st) == nil && st.Leader == st.Header.MemberID
	})
}
