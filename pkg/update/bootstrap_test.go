package update

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// shippedFile is a file's content in a MachineConfig written to dyn, and
// whether the MachineConfig carries it.
func shippedFile(t *testing.T, dyn *dynamicfake.FakeDynamicClient, mc, path string) ([]byte, bool) {
	t.Helper()
	data, ok, err := machineconfig.Fetch(context.Background(), dyn, mc, path)
	if err != nil {
		t.Fatal(err)
	}
	return data, ok
}

func liveNode(name, addr string, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"unrelated": "x"}}}
	if addr != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
	}
	return n
}

// TestApplyShipsTheBootstrapNodeList: MachineConfigs rewritten by `vipctl
// update` keep the bootstrap node list `vipctl render --nodes` shipped,
// from the live cluster's Nodes (a Node without an address yet left out
// and named) or from --nodes. Before, they shipped none: a node installed
// after the update started keepalived without instances, and its API VIP
// waited for the API. Either way the list holds the control-plane nodes
// only, with only what rendering reads, in the control-plane MachineConfig
// only (docs/render.md, "The bootstrap node list").
func TestApplyShipsTheBootstrapNodeList(t *testing.T) {
	t.Parallel()
	p, err := Compute(targeting(t, "4.14"), targeting(t, "4.19"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		override  []byte
		wantNodes []string
		wantLog   string
	}{
		{name: "live Nodes", wantNodes: []string{"master-0"}, wantLog: "left out node worker-9: status.addresses has no InternalIP or ExternalIP"},
		{name: "--nodes", override: []byte(`apiVersion: v1
kind: NodeList
items:
- metadata: {name: master-5, labels: {node-role.kubernetes.io/control-plane: ""}, annotations: {unrelated: x}}
  status:
    addresses: [{type: InternalIP, address: 198.51.100.15}]
    images: [{names: ["quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123"], sizeBytes: 1000}]
- metadata: {name: worker-5}
  status: {addresses: [{type: InternalIP, address: 198.51.100.25}]}
`), wantNodes: []string{"master-5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(
				liveNode("master-0", "198.51.100.11", map[string]string{"node-role.kubernetes.io/master": ""}),
				liveNode("worker-0", "198.51.100.21", map[string]string{"node-role.kubernetes.io/worker": ""}),
				liveNode("worker-9", "", nil),
			)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{machineconfig.GVR: "MachineConfigList"})
			plan := *p
			if tc.override != nil {
				if plan.BootstrapNodes, err = cluster.DecodeNodeList("--nodes", tc.override); err != nil {
					t.Fatal(err)
				}
			}
			var log bytes.Buffer
			if err := (Cluster{Kube: kube, Dynamic: dyn, Namespace: "vipctl-system"}).Apply(context.Background(), &plan, nil, false, &log); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log %q, want %q", log.String(), tc.wantLog)
			}
			if _, ok := shippedFile(t, dyn, "50-vipctl-worker", onnode.BootstrapNodesPath); ok {
				t.Errorf("50-vipctl-worker ships %s: no worker reads it", onnode.BootstrapNodesPath)
			}
			const mc = "50-vipctl-master"
			data, ok := shippedFile(t, dyn, mc, onnode.BootstrapNodesPath)
			if !ok {
				t.Fatalf("%s ships no %s", mc, onnode.BootstrapNodesPath)
			}
			nodes, err := cluster.ParseNodeList(onnode.BootstrapNodesPath, data, "br-ex")
			if err != nil {
				t.Fatalf("%s: %v\n%s", mc, err, data)
			}
			var names []string
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNodes, ",") {
				t.Errorf("%s: bootstrap nodes %v, want %v", mc, names, tc.wantNodes)
			}
			for _, unread := range []string{"unrelated", "images", "sha256"} {
				if bytes.Contains(data, []byte(unread)) {
					t.Errorf("%s: the list carries %q, which rendering never reads:\n%s", mc, unread, data)
				}
			}
		})
	}
}
