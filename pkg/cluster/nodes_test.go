package cluster

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func annotatedNode(name, iface string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{InterfaceAnnotation: iface}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}},
	}
}

// TestInterfaceAnnotationValidated: the annotation lands in keepalived.conf,
// so one that would inject config (a newline and a brace) or is no
// interface name leaves its node out, with a bounded message; every other
// node still renders.
func TestInterfaceAnnotationValidated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 100000)
	nodes, errs := Nodes([]*corev1.Node{
		annotatedNode("good", "bond0.100"),
		annotatedNode("inject", "eth0\n}\nvrrp_script evil {\n script \"/bin/sh\"\n"),
		annotatedNode("huge", long),
	}, "br-ex")
	if len(nodes) != 1 || nodes[0].Name != "good" || nodes[0].Interface != "bond0.100" {
		t.Fatalf("nodes = %+v, want only good on bond0.100", nodes)
	}
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want one per bad node", errs)
	}
	want := `node inject: annotation vipctl.io/interface "eth0\n}\nvrrp_script evil {\n script \"/bin/sh\"\n": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`
	if errs[0].Error() != want {
		t.Errorf("got  %s\nwant %s", errs[0], want)
	}
	if n := len(errs[1].Error()); n > 300 {
		t.Errorf("message about a 100 kB annotation is %d bytes; want it bounded", n)
	}
}

// TestBootstrapNodeList: the list the control-plane MachineConfig ships
// names the control-plane nodes only (master or control-plane role), with
// only the fields rendering reads; a Node without an address is left out
// and named.
func TestBootstrapNodeList(t *testing.T) {
	t.Parallel()
	node := func(name, role, addr string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/" + role: "", "kubernetes.io/os": "linux"},
			Annotations: map[string]string{"machineconfiguration.openshift.io/state": "Done", InterfaceAnnotation: "bond0"}}}
		if addr != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: name}}
		}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123"}, SizeBytes: 1}}
		return n
	}
	data, skipped, err := BootstrapNodeList([]corev1.Node{
		node("worker-0", "worker", "198.51.100.21"),
		node("master-1", "control-plane", "198.51.100.12"),
		node("master-0", "master", "198.51.100.11"),
		node("master-2", "master", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0].Error() != "node master-2: status.addresses has no InternalIP or ExternalIP" {
		t.Errorf("skipped %v", skipped)
	}
	want := `apiVersion: v1
items:
- metadata:
    annotations:
      vipctl.io/interface: bond0
    labels:
      kubernetes.io/os: linux
      node-role.kubernetes.io/master: ""
    name: master-0
  status:
    addresses:
    - address: 198.51.100.11
      type: InternalIP
    - address: master-0
      type: Hostname
- metadata:
    annotations:
      vipctl.io/interface: bond0
    labels:
      kubernetes.io/os: linux
      node-role.kubernetes.io/control-plane: ""
    name: master-1
  status:
    addresses:
    - address: 198.51.100.12
      type: InternalIP
    - address: master-1
      type: Hostname
kind: NodeList
`
	if string(data) != want {
		t.Errorf("got\n%s\nwant\n%s", data, want)
	}
	if nodes, err := ParseNodeList("nodes.yaml", data, "br-ex"); err != nil || len(nodes) != 2 || !nodes[0].ControlPlane || nodes[0].Interface != "bond0" {
		t.Errorf("the list does not read back: %v %+v", err, nodes)
	}
	if data, _, _ := BootstrapNodeList([]corev1.Node{node("worker-0", "worker", "198.51.100.21")}); data != nil {
		t.Errorf("a list without a control-plane node: %s, want none", data)
	}
}

// TestWithBootstrapNodes: a newer bootstrap list replaces the view's
// control plane (master-9 was replaced by master-3 since the view) and
// keeps the view's workers, which no list names.
func TestWithBootstrapNodes(t *testing.T) {
	t.Parallel()
	view := []Node{{Name: "master-0", ControlPlane: true, Interface: "old"}, {Name: "master-9", ControlPlane: true}, {Name: "worker-0"}}
	list := []Node{{Name: "master-3", ControlPlane: true}, {Name: "master-0", ControlPlane: true, Interface: "new"}}
	got := WithBootstrapNodes(view, list)
	var names []string
	for _, n := range got {
		names = append(names, n.Name+"/"+n.Interface)
	}
	if want := "master-0/new master-3/ worker-0/"; strings.Join(names, " ") != want {
		t.Errorf("got %v, want %s", names, want)
	}
}

func TestNameMismatch(t *testing.T) {
	t.Parallel()
	listed := []string{"master-0", "master-1.ocp4.example.com", "worker-0"}
	for name, want := range map[string]string{
		"master-0.ocp4.example.com": "master-0",
		"master-1":                  "master-1.ocp4.example.com",
		"MASTER-0":                  "master-0",
		"master-1.other.example.":   "master-1.ocp4.example.com",
		"master-0":                  "",
		"master-2":                  "",
	} {
		if got := NameMismatch(name, listed); got != want {
			t.Errorf("NameMismatch(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestDecodeNodeListJSON: `oc get nodes -o json` reads as its YAML form
// does, without the YAML parser; a YAML flow mapping that only looks like
// JSON still goes through it.
func TestDecodeNodeListJSON(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../examples/nodes/compact.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := DecodeNodeList("nodes.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := DecodeNodeList("nodes.json", append([]byte("\n  "), js...))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) || len(fromJSON) != 3 {
		t.Errorf("JSON read as\n%+v\nYAML as\n%+v", fromJSON, fromYAML)
	}
	flow, err := DecodeNodeList("flow.yaml", []byte(`{kind: List, items: [{metadata: {name: master-0}}]}`))
	if err != nil || len(flow) != 1 || flow[0].Name != "master-0" {
		t.Errorf("flow YAML: %v %+v", err, flow)
	}
}

// TestSomeOf: a message names a few of a list and counts the rest (a
// drain of a node holding a pool of 5000 printed all 5000).
func TestSomeOf(t *testing.T) {
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("2001:db8::%x", i))
	}
	for _, tc := range []struct {
		list []string
		want string
	}{
		{[]string{"198.51.100.5"}, "198.51.100.5"},
		{many[:10], strings.Join(many[:10], ", ")},
		{many, strings.Join(many[:10], ", ") + " and 4990 more"},
	} {
		if got := SomeOf(tc.list, 10); got != tc.want {
			t.Errorf("%d addresses: %q, want %q", len(tc.list), got, tc.want)
		}
	}
}
