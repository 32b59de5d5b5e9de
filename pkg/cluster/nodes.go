package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Node is what rendering needs to know about one node.
type Node struct {
	Name string
	// Labels select the node for service pools.
	Labels map[string]string
	// Addresses are the node's own addresses (InternalIP first); VRRP speaks
	// from the one inside the VIP's machine network.
	Addresses []netip.Addr
	// Interface carries VRRP and the VIPs; empty means spec.vrrp.interface.
	Interface string
	// Interfaces are the node's network interfaces when known (the
	// InterfacesAnnotation of a node list; the sidecar's own node from
	// netlink): a pool or IngressController whose own interface is not
	// among them leaves the node out. Nil means unknown: every interface
	// is taken to exist.
	Interfaces []string `json:",omitempty"`
	// ControlPlane nodes run haproxy and may hold the API VIP.
	ControlPlane bool
	// ExcludeServices is the Kubernetes label ExcludeLBLabel: the node
	// holds no Service VIP while a peer can (it stays in the pool
	// instances at the lowest priority, so the VIPs leave it make before
	// break).
	ExcludeServices bool `json:",omitempty"`
}

// Label and annotation names read from Kubernetes Node objects.
const (
	InterfaceAnnotation = "vipctl.io/interface"
	// InterfacesAnnotation lists a node's network interfaces, comma
	// separated, in a node list (`--nodes`): with it `validate` and
	// `render` refuse a pool or IngressController whose own interface
	// (interface, interfaceLabel) a node they select lacks.
	InterfacesAnnotation = "vipctl.io/interfaces"
	// ExcludeLBLabel is Kubernetes' own signal that a node must not serve
	// external load balancers (set for maintenance, or on nodes that must
	// never carry Service traffic).
	ExcludeLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"
	// DrainAnnotation ("true") asks the node's sidecar to give every VIP
	// away make-before-break, as keepalived's preStop does, until it is
	// removed (`vipctl drain NODE`, `vipctl undrain NODE`).
	DrainAnnotation = "vipctl.io/drain"
	roleLabelPrefix = "node-role.kubernetes.io/"
)

// NodeFromKubernetes extracts the facts from a Node object: roles from
// node-role.kubernetes.io/* labels, addresses from status.addresses
// (InternalIP before ExternalIP), the interface from an annotation or
// defaultInterface.
func NodeFromKubernetes(n *corev1.Node, defaultInterface string) (Node, error) {
	out := Node{Name: n.Name, Labels: n.Labels, Interface: defaultInterface}
	if iface := n.Annotations[InterfaceAnnotation]; iface != "" {
		// The annotation is written by whoever may edit Nodes and lands in
		// keepalived.conf: a newline there would add config of their
		// choosing. The node is left out (its own sidecar keeps its last
		// good config; every other node renders without it as a peer)
		// rather than moved to an interface nobody chose.
		if msg := v1alpha1.InterfaceNameError(iface); msg != "" {
			return Node{}, fmt.Errorf("node %s: annotation %s %q: %s", n.Name, InterfaceAnnotation, boundValue(iface), msg)
		}
		out.Interface = iface
	}
	if list, ok := n.Annotations[InterfacesAnnotation]; ok {
		out.Interfaces = []string{}
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if msg := v1alpha1.InterfaceNameError(name); msg != "" {
				return Node{}, fmt.Errorf("node %s: annotation %s: %q: %s", n.Name, InterfacesAnnotation, boundValue(name), msg)
			}
			out.Interfaces = append(out.Interfaces, name)
		}
	}
	_, out.ExcludeServices = n.Labels[ExcludeLBLabel]
	out.ControlPlane = IsControlPlane(n.Labels)
	for _, want := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != want {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				return Node{}, fmt.Errorf("node %s: status.addresses: invalid %s %q", n.Name, a.Type, a.Address)
			}
			out.Addresses = append(out.Addresses, ip.Unmap())
		}
	}
	if len(out.Addresses) == 0 {
		return Node{}, fmt.Errorf("node %s: status.addresses has no InternalIP or ExternalIP", n.Name)
	}
	return out, nil
}

// boundValue cuts a value read from the cluster before it goes into a
// message: an annotation can hold up to 256 KiB.
func boundValue(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// SlimNodes keeps of items only what rendering reads (name, labels, the
// interface annotation, addresses), sorted by name: a real Node carries
// 20 KB and more (cached images, conditions, OVN and MCO annotations) that
// no vipctl code reads. A Node rendering would refuse (no address yet) is
// left out and named in skipped: one registering Node must not make every
// node's init container fail.
func SlimNodes(items []corev1.Node) (slim []corev1.Node, skipped []error) {
	for i := range items {
		n := &items[i]
		if _, err := NodeFromKubernetes(n, ""); err != nil {
			skipped = append(skipped, err)
			continue
		}
		out := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
		for _, k := range []string{InterfaceAnnotation, InterfacesAnnotation} {
			if v, ok := n.Annotations[k]; ok {
				if out.Annotations == nil {
					out.Annotations = map[string]string{}
				}
				out.Annotations[k] = v
			}
		}
		slim = append(slim, out)
	}
	sort.Slice(slim, func(i, j int) bool { return slim[i].Name < slim[j].Name })
	return slim, skipped
}

// SlimNodeList is a NodeList file with only the fields SlimNodes keeps:
// corev1.Node would also write its empty spec, nodeInfo and
// daemonEndpoints, a third of every entry.
type SlimNodeList struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Items      []SlimNode `json:"items"`
}

// SlimNode is one Node of a SlimNodeList.
type SlimNode struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Status struct {
		Addresses []corev1.NodeAddress `json:"addresses"`
	} `json:"status"`
}

// NewSlimNodeList is nodes as a NodeList file that ParseNodeList reads,
// with the fields SlimNodes keeps and nothing else.
func NewSlimNodeList(nodes []corev1.Node) SlimNodeList {
	f := SlimNodeList{APIVersion: "v1", Kind: "NodeList", Items: make([]SlimNode, len(nodes))}
	for i, n := range nodes {
		it := &f.Items[i]
		it.Metadata.Name, it.Metadata.Labels, it.Metadata.Annotations = n.Name, n.Labels, n.Annotations
		it.Status.Addresses = n.Status.Addresses
	}
	return f
}

// MarshalNodeList is NewSlimNodeList in YAML.
func MarshalNodeList(nodes []corev1.Node) ([]byte, error) {
	return yaml.Marshal(NewSlimNodeList(nodes))
}

// BootstrapNodeList is the bootstrap node list (onnode.BootstrapNodesPath)
// that `vipctl render --nodes` and `vipctl update` ship to the
// control-plane nodes: the control-plane Nodes of items, slim (SlimNodes).
// Before the API answers only the API VIP matters, and only control-plane
// nodes hold it; every other VIP, and every worker, waits for the API
// anyway. So the list stays a few KiB however many workers a cluster has,
// where the 2000 nodes of a large cluster would not fit in a MachineConfig
// (docs/render.md, "The bootstrap node list"). data is nil when no
// control-plane Node can be listed.
func BootstrapNodeList(items []corev1.Node) (data []byte, skipped []error, err error) {
	slim, skipped := SlimNodes(items)
	var cp []corev1.Node
	for _, n := range slim {
		if IsControlPlane(n.Labels) {
			cp = append(cp, n)
		}
	}
	if len(cp) == 0 {
		return nil, skipped, nil
	}
	data, err = MarshalNodeList(cp)
	return data, skipped, err
}

// RoleLabel is the label that gives a Node a role (master,
// control-plane, worker).
func RoleLabel(role string) string { return roleLabelPrefix + role }

// IsControlPlane tells whether a Node's labels give it a control-plane
// role (node-role.kubernetes.io/master or /control-plane).
func IsControlPlane(labels map[string]string) bool {
	for l := range labels {
		role, ok := strings.CutPrefix(l, roleLabelPrefix)
		if ok && (role == "master" || role == "control-plane") {
			return true
		}
	}
	return false
}

// NodeListExample is the shape a node list file must have, for error
// messages.
const NodeListExample = `apiVersion: v1
kind: NodeList
items:
- metadata:
    name: master-0.ocp4.example.com
    labels: {node-role.kubernetes.io/master: ""}
  status:
    addresses: [{type: InternalIP, address: 198.51.100.11}]`

// LoadNodeList reads `oc get nodes -o yaml` output (a v1 List or NodeList).
func LoadNodeList(path, defaultInterface string) ([]Node, error) {
	f, err := LoadNodeListFile(path, defaultInterface)
	return f.Nodes, err
}

// NodeListFile is a NodeList file read once: its Node objects (what
// `render --nodes` ships the bootstrap node list from) and what rendering
// needs of each.
type NodeListFile struct {
	Objects []corev1.Node
	Nodes   []Node
}

// LoadNodeListFile reads a NodeList file (`oc get nodes -o yaml`, `vipctl
// nodes`); 2000 real Nodes are 30 MB of YAML, read only once.
func LoadNodeListFile(path, defaultInterface string) (NodeListFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return NodeListFile{}, err
	}
	return parseNodeListFile(path, data, defaultInterface)
}

// ParseNodeList is LoadNodeList without the file; name says where data
// came from in errors.
func ParseNodeList(path string, data []byte, defaultInterface string) ([]Node, error) {
	f, err := parseNodeListFile(path, data, defaultInterface)
	return f.Nodes, err
}

func parseNodeListFile(path string, data []byte, defaultInterface string) (NodeListFile, error) {
	items, err := DecodeNodeList(path, data)
	if err != nil {
		return NodeListFile{}, err
	}
	return NodeListFromObjects(path, items, defaultInterface)
}

// NodeListFromObjects is a node list file's decoded items (DecodeNodeList)
// as rendering reads them; path says where they came from in errors.
func NodeListFromObjects(path string, items []corev1.Node, defaultInterface string) (NodeListFile, error) {
	nodes := make([]Node, 0, len(items))
	seen := map[string]bool{}
	for i := range items {
		n, err := NodeFromKubernetes(&items[i], defaultInterface)
		if err != nil {
			return NodeListFile{}, fmt.Errorf("%s: items[%d]: %w", path, i, err)
		}
		if seen[n.Name] {
			return NodeListFile{}, fmt.Errorf("%s: items[%d]: node %s listed twice", path, i, n.Name)
		}
		seen[n.Name] = true
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	if items == nil {
		items = []corev1.Node{}
	}
	return NodeListFile{Objects: items, Nodes: nodes}, nil
}

// DecodeNodeList reads the Node objects of a NodeList file (a v1 List or
// NodeList); path says where data came from in errors.
func DecodeNodeList(path string, data []byte) ([]corev1.Node, error) {
	js := data
	// `oc get nodes -o json` is read as it is: the YAML parser takes
	// seconds over the 40 MB of 2000 real Nodes.
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(data) {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: not valid YAML: %w", path, err)
		}
	}
	var list corev1.NodeList
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &list); err != nil {
		// Another kind's fields may not fit a Node's: say what it is.
		var kinds struct {
			Items []metav1.TypeMeta `json:"items"`
		}
		if json.Unmarshal(js, &kinds) == nil {
			if err := itemKinds(path, kinds.Items); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%s: not a NodeList: %w; want, as `oc get nodes -o yaml` or `vipctl nodes` write it:\n%s", path, err, NodeListExample)
	}
	if list.Kind != "List" && list.Kind != "NodeList" {
		return nil, fmt.Errorf("%s: kind %q: want a NodeList, as `oc get nodes -o yaml` or `vipctl nodes` write it:\n%s", path, list.Kind, NodeListExample)
	}
	types := make([]metav1.TypeMeta, len(list.Items))
	for i := range list.Items {
		types[i] = list.Items[i].TypeMeta
	}
	if err := itemKinds(path, types); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// itemKinds refuses a List whose items are not Nodes (`oc get services -o
// yaml`), naming what they are: read as Nodes they would only lack an
// address. An item without a kind is taken as a Node, as `vipctl nodes`
// writes them.
func itemKinds(path string, items []metav1.TypeMeta) error {
	for i, it := range items {
		if it.Kind != "" && it.Kind != "Node" {
			return fmt.Errorf("%s: items[%d].kind: %q: a List of %s objects, not of Nodes; want a NodeList, as `oc get nodes -o yaml` or `vipctl nodes` write it:\n%s", path, i, it.Kind, it.Kind, NodeListExample)
		}
	}
	return nil
}

// Addresses are the nodes' own addresses, for v1alpha1.ValidateNodes and
// the allocator's reserved addresses.
func Addresses(nodes []Node) []v1alpha1.NodeAddresses {
	out := make([]v1alpha1.NodeAddresses, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, v1alpha1.NodeAddresses{Name: n.Name, Addresses: n.Addresses, ControlPlane: n.ControlPlane})
	}
	return out
}

// Drained tells whether a Node asks to be drained (DrainAnnotation).
func Drained(n *corev1.Node) bool { return n.Annotations[DrainAnnotation] == "true" }

// Matches reports whether every key=value of selector is among labels (a
// pool's nodeSelector or serviceSelector).
func Matches(selector, labels map[string]string) bool { return v1alpha1.Matches(selector, labels) }

// WithBootstrapNodes is a last-good view's nodes under a newer bootstrap
// node list (a MachineConfig rewritten since the view was saved). The list
// speaks for the control plane, the only nodes BootstrapNodeList names: the
// view's control-plane nodes give way to it, and its other nodes stay,
// since no list names them any more. A node in both is taken from the list.
func WithBootstrapNodes(view, list []Node) []Node {
	out := append([]Node{}, list...)
	listed := make(map[string]bool, len(list))
	for _, n := range list {
		listed[n.Name] = true
	}
	for _, n := range view {
		if !n.ControlPlane && !listed[n.Name] {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NameMismatch is the listed name that probably names the same host as
// name under another spelling, a fully qualified name against a short one
// (master-0.ocp4.example.com, master-0) or another case; "" when none. A
// Node's name is its hostname as the kubelet found it, which need not be
// the name an installer's host list or an administrator wrote down.
func NameMismatch(name string, listed []string) string {
	short := func(s string) string {
		first, _, _ := strings.Cut(strings.ToLower(strings.TrimSuffix(s, ".")), ".")
		return first
	}
	for _, l := range listed {
		if l != name && short(l) == short(name) {
			return l
		}
	}
	return ""
}

// SomeOf lists up to shown of list and counts the rest, for a message
// that must stay one readable line however long the list.
func SomeOf(list []string, shown int) string {
	if len(list) <= shown {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:shown], ", "), len(list)-shown)
}

// NotListed explains why node is missing from a node list (names, read
// from what) and what follows: the name that probably means it (an FQDN
// against a short name) before anything else.
func NotListed(node, what string, names []string) string {
	if m := NameMismatch(node, names); m != "" {
		return fmt.Sprintf("node %s is not in %s, which lists %s: if that is this node, list it by its Node name %s, as `oc get nodes` shows it (vipctl nodes --from-cluster writes the list with those names)", node, what, m, node)
	}
	names = slices.Sorted(slices.Values(names))
	list := SomeOf(names, 5)
	if list == "" {
		list = "no node"
	}
	return fmt.Sprintf("node %s is not in %s (%s): a node added after the list was written, or one listed under another name", node, what, list)
}
