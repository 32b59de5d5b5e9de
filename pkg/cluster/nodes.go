package cluster

import (
	"fmt"
	"net/netip"
	"os"
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
	_, out.ExcludeServices = n.Labels[ExcludeLBLabel]
	for l := range n.Labels {
		role, ok := strings.CutPrefix(l, roleLabelPrefix)
		if ok && (role == "master" || role == "control-plane") {
			out.ControlPlane = true
		}
	}
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

// BootstrapNodeList is the bootstrap node list (render.BootstrapNodesPath)
// for live Nodes, as `vipctl update` ships it when it rewrites the
// MachineConfigs: only what rendering reads (name, labels, the interface
// annotation, addresses), sorted by name. A Node rendering would refuse
// (no address yet) is left out and named in skipped: one registering
// Node must not make every node's init container fail.
func BootstrapNodeList(items []corev1.Node) (data []byte, skipped []error, err error) {
	list := corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	for i := range items {
		n := &items[i]
		if _, err := NodeFromKubernetes(n, ""); err != nil {
			skipped = append(skipped, err)
			continue
		}
		out := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
		if iface := n.Annotations[InterfaceAnnotation]; iface != "" {
			out.Annotations = map[string]string{InterfaceAnnotation: iface}
		}
		list.Items = append(list.Items, out)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	data, err = yaml.Marshal(list)
	return data, skipped, err
}

// LoadNodeList reads `oc get nodes -o yaml` output (a v1 List or NodeList).
func LoadNodeList(path, defaultInterface string) ([]Node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseNodeList(path, data, defaultInterface)
}

// ParseNodeList is LoadNodeList without the file; name says where data
// came from in errors.
func ParseNodeList(path string, data []byte, defaultInterface string) ([]Node, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %w", path, err)
	}
	var list corev1.NodeList
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &list); err != nil {
		return nil, fmt.Errorf("%s: not a NodeList: %w", path, err)
	}
	if list.Kind != "List" && list.Kind != "NodeList" {
		return nil, fmt.Errorf("%s: kind %q: want a NodeList (oc get nodes -o yaml)", path, list.Kind)
	}
	nodes := make([]Node, 0, len(list.Items))
	seen := map[string]bool{}
	for i := range list.Items {
		n, err := NodeFromKubernetes(&list.Items[i], defaultInterface)
		if err != nil {
			return nil, fmt.Errorf("%s: items[%d]: %w", path, i, err)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("%s: items[%d]: node %s listed twice", path, i, n.Name)
		}
		seen[n.Name] = true
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// Addresses are the nodes' own addresses, for v1alpha1.ValidateNodes and
// the allocator's reserved addresses.
func Addresses(nodes []Node) []v1alpha1.NodeAddresses {
	out := make([]v1alpha1.NodeAddresses, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, v1alpha1.NodeAddresses{Name: n.Name, Addresses: n.Addresses})
	}
	return out
}

// Drained tells whether a Node asks to be drained (DrainAnnotation).
func Drained(n *corev1.Node) bool { return n.Annotations[DrainAnnotation] == "true" }

// Matches reports whether every key=value of selector is among labels (a
// pool's nodeSelector or serviceSelector).
func Matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		got, ok := labels[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}
