package nodelist

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// Input is a node list a person gives a command (`render`, `validate`,
// `update` and `bootstrap --nodes`), checked as strictly as a cluster
// file before anything is rendered, written or started.
type Input struct {
	// Path is the node list file.
	Path string
	// Config is the cluster file the list is checked against (its
	// machine networks, its BGP peers); nil checks the list alone.
	Config *v1alpha1.ClusterVIPs
	// ConfigPath names Config in messages.
	ConfigPath string
	// Interface is the VRRP interface of nodes without the
	// vipctl.io/interface annotation.
	Interface string
}

// Load reads and checks the node list: every problem at once, each with
// its field path (items[1].metadata.name), under the file's name.
func (in Input) Load() (cluster.NodeListFile, error) {
	data, err := os.ReadFile(in.Path)
	if err != nil {
		return cluster.NodeListFile{}, err
	}
	items, err := cluster.DecodeNodeList(in.Path, data)
	if err != nil {
		if errs := kindErrors(data); len(errs) > 0 {
			return cluster.NodeListFile{}, fmt.Errorf("%s: %w", in.Path, &v1alpha1.ValidationError{Errors: errs})
		}
		return cluster.NodeListFile{}, err
	}
	if errs := in.Validate(items); len(errs) > 0 {
		return cluster.NodeListFile{}, fmt.Errorf("%s: %w", in.Path, &v1alpha1.ValidationError{Errors: errs})
	}
	return cluster.NodeListFromObjects(in.Path, items, in.Interface)
}

// kindErrors names, in the file's words and with full paths, the values
// of the fields rendering reads (cluster.SlimNodeList's) that are of the
// wrong kind: the decoder's own message names Go types and drops the
// list indices ("Go struct field NodeStatus.items.status.addresses of
// type []v1.NodeAddress").
func kindErrors(data []byte) field.ErrorList {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil
	}
	return v1alpha1.KindErrors(js, reflect.TypeFor[cluster.SlimNodeList]())
}

// Validate is every rule a node list must keep, with the field path of
// each item that breaks one: at least one node; names that Kubernetes
// takes for a Node (a DNS-1123 subdomain: a name becomes a haproxy server
// line and a directory of `render`'s output, so a newline or a slash must
// never get there), each once; interface annotations that name an
// interface; an InternalIP or ExternalIP on each node, each an IP
// address and no two nodes with one (a node would be its own VRRP peer,
// haproxy would balance twice onto one host); and with the cluster file,
// an address inside its machine networks on each node, and no node at a
// BGP peer's address.
func (in Input) Validate(items []corev1.Node) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("items")
	if len(items) == 0 {
		return field.ErrorList{field.Required(root, "no node: a node list names the nodes to render for; without --nodes no node's files are written")}
	}
	names := map[string]int{}
	owner := map[netip.Addr]*field.Path{}
	ownerName := map[netip.Addr]string{}
	for i := range items {
		n := &items[i]
		path := root.Index(i)
		errs = append(errs, validateName(n.Name, path.Child("metadata", "name"))...)
		if first, dup := names[n.Name]; dup && n.Name != "" {
			errs = append(errs, field.Duplicate(path.Child("metadata", "name"), n.Name+" (also items["+fmt.Sprint(first)+"])"))
		} else {
			names[n.Name] = i
		}
		errs = append(errs, validateAnnotations(n.Annotations, path.Child("metadata", "annotations"))...)
		addrs, aerrs := nodeAddresses(n, path.Child("status", "addresses"))
		errs = append(errs, aerrs...)
		for _, a := range addrs {
			if first, dup := owner[a.addr]; dup {
				if ownerName[a.addr] != n.Name {
					errs = append(errs, field.Invalid(a.path, a.addr.String(), fmt.Sprintf("also the address of node %s (%s): the node would be its own VRRP peer and haproxy would list one host twice", ownerName[a.addr], first)))
				}
				continue
			}
			owner[a.addr], ownerName[a.addr] = a.path, n.Name
		}
		if in.Config != nil && len(aerrs) == 0 {
			errs = append(errs, in.againstConfig(n.Name, addrs, path.Child("status", "addresses"))...)
		}
	}
	return errs
}

// validateName refuses what Kubernetes refuses as a Node's name.
func validateName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "the Node's name")}
	}
	if msg := cluster.NodeNameError(name); msg != "" {
		return field.ErrorList{field.Invalid(path, name, msg)}
	}
	return nil
}

// validateAnnotations checks the annotations rendering reads, as
// cluster.NodeFromKubernetes does, with their paths.
func validateAnnotations(ann map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if iface, ok := ann[cluster.InterfaceAnnotation]; ok {
		if msg := v1alpha1.InterfaceNameError(iface); msg != "" {
			errs = append(errs, field.Invalid(path.Key(cluster.InterfaceAnnotation), iface, msg))
		}
	}
	if list, ok := ann[cluster.InterfacesAnnotation]; ok {
		for _, name := range strings.Split(list, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			if msg := v1alpha1.InterfaceNameError(name); msg != "" {
				errs = append(errs, field.Invalid(path.Key(cluster.InterfacesAnnotation), name, msg))
			}
		}
	}
	return errs
}

// listedAddr is one of a node's own addresses and where it is written.
type listedAddr struct {
	addr netip.Addr
	path *field.Path
}

// nodeAddresses are the node's InternalIP and ExternalIP addresses, the
// ones rendering reads.
func nodeAddresses(n *corev1.Node, path *field.Path) ([]listedAddr, field.ErrorList) {
	var out []listedAddr
	var errs field.ErrorList
	for j, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		p := path.Index(j).Child("address")
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			errs = append(errs, field.Invalid(p, a.Address, "not an IP address"))
			continue
		}
		out = append(out, listedAddr{addr: ip.Unmap(), path: p})
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, field.Required(path, "no InternalIP or ExternalIP: VRRP speaks from the node's own address"))
	}
	return out, errs
}

// againstConfig checks a node's addresses against the cluster file: one
// inside its machine networks (VRRP speaks from it), none a BGP peer's.
func (in Input) againstConfig(name string, addrs []listedAddr, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var networks []netip.Prefix
	for _, s := range in.Config.Spec.MachineNetworks {
		if p, err := netip.ParsePrefix(s); err == nil {
			networks = append(networks, p.Masked())
		}
	}
	inside := len(networks) == 0
	for _, a := range addrs {
		for _, n := range networks {
			inside = inside || n.Contains(a.addr)
		}
	}
	if !inside {
		list := make([]string, len(addrs))
		for i, a := range addrs {
			list[i] = a.addr.String()
		}
		errs = append(errs, field.Invalid(path, strings.Join(list, ", "),
			fmt.Sprintf("no address of node %s is inside spec.machineNetworks (%s) of %s: VRRP speaks from the node's address in the VIPs' network", name, strings.Join(in.Config.Spec.MachineNetworks, ", "), in.ConfigPath)))
	}
	if b := in.Config.Spec.BGP; b != nil {
		for _, a := range addrs {
			for k, p := range b.Peers {
				if peer, err := netip.ParseAddr(p.Address); err == nil && peer.Unmap() == a.addr {
					errs = append(errs, field.Invalid(a.path, a.addr.String(),
						fmt.Sprintf("is spec.bgp.peers[%d].address of %s: node %s would be its own BGP peer", k, in.ConfigPath, name)))
				}
			}
		}
	}
	return errs
}
