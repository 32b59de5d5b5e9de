package nodelist

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/test/fixture"
)

// node is one item of a node list in YAML, with InternalIP addresses.
func node(name string, addrs ...string) string {
	list := make([]string, len(addrs))
	for i, a := range addrs {
		list[i] = fmt.Sprintf("{type: InternalIP, address: %q}", a)
	}
	return fmt.Sprintf("- metadata: {name: %q, labels: {node-role.kubernetes.io/master: \"\"}}\n  status: {addresses: [%s]}\n", name, strings.Join(list, ", "))
}

// TestInputRefuses: a node list given with --nodes is checked like a
// cluster file: every problem at once, under the file's name, with the
// field path of the item at fault, before anything is rendered.
func TestInputRefuses(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: v1\nkind: NodeList\nitems:\n"
	racks := fixture.Repo("examples/bgp-two-racks.yaml")
	cases := []struct {
		name   string
		list   string
		config string // checked against this cluster file when set
		want   string // "" for a list that is accepted
	}{
		{name: "three good nodes", list: head + node("master-0", "198.51.100.11") + node("master-1", "198.51.100.12") + node("master-2.ocp4.example.com", "198.51.100.13")},
		{name: "a node's internal and external address alike", list: head + "- metadata: {name: master-0}\n  status: {addresses: [{type: InternalIP, address: 198.51.100.11}, {type: ExternalIP, address: 198.51.100.11}]}\n"},
		{name: "an IPv6 address outside the machine networks beside one inside", config: racks, list: head + node("master-0", "198.51.100.11", "2001:db8::11")},
		{name: "empty", list: head, want: "items: Required value: no node: a node list names the nodes to render for; without --nodes no node's files are written"},
		{name: "items: null", list: "apiVersion: v1\nkind: List\nitems: null\n", want: "items: Required value: no node"},
		{name: "a newline in a name", list: head + node("master-0\n  server evil 203.0.113.66:6443", "198.51.100.11"),
			want: `items[0].metadata.name: Invalid value: "master-0\n  server evil 203.0.113.66:6443": not a Node name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "a path for a name", list: head + node("../machineconfigs", "198.51.100.11"),
			want: `items[0].metadata.name: Invalid value: "../machineconfigs": not a Node name: a lowercase RFC 1123 subdomain`},
		{name: "upper case", list: head + node("Master-0", "198.51.100.11"), want: `items[0].metadata.name: Invalid value: "Master-0": not a Node name`},
		{name: "no name", list: head + node("", "198.51.100.11"), want: "items[0].metadata.name: Required value: the Node's name"},
		{name: "a name twice", list: head + node("master-0", "198.51.100.11") + node("master-0", "198.51.100.12"),
			want: `items[1].metadata.name: Duplicate value: "master-0 (also items[0])"`},
		{name: "two nodes, one IPv4 address", list: head + node("master-0", "198.51.100.11") + node("master-1", "198.51.100.11"),
			want: `items[1].status.addresses[0].address: Invalid value: "198.51.100.11": also the address of node master-0 (items[0].status.addresses[0].address): the node would be its own VRRP peer and haproxy would list one host twice`},
		{name: "two nodes, one IPv6 address spelt two ways", list: head + node("master-0", "198.51.100.11", "2001:db8:100::11") + node("master-1", "198.51.100.12", "2001:DB8:100:0:0::11"),
			want: `items[1].status.addresses[1].address: Invalid value: "2001:db8:100::11": also the address of node master-0 (items[0].status.addresses[1].address)`},
		{name: "an IPv4-mapped IPv6 address of another node", list: head + node("master-0", "198.51.100.11") + node("master-1", "::ffff:198.51.100.11"),
			want: `items[1].status.addresses[0].address: Invalid value: "198.51.100.11": also the address of node master-0`},
		{name: "not an IP address", list: head + node("master-0", "198.51.100.300"), want: `items[0].status.addresses[0].address: Invalid value: "198.51.100.300": not an IP address`},
		{name: "no InternalIP", list: head + "- metadata: {name: master-0}\n  status: {addresses: [{type: Hostname, address: master-0}]}\n",
			want: "items[0].status.addresses: Required value: no InternalIP or ExternalIP: VRRP speaks from the node's own address"},
		{name: "an interface annotation that is no interface", list: head + "- metadata: {name: master-0, annotations: {vipctl.io/interface: \"br-ex\\nvrrp_script x {\"}}\n  status: {addresses: [{type: InternalIP, address: 198.51.100.11}]}\n",
			want: `items[0].metadata.annotations[vipctl.io/interface]: Invalid value: "br-ex\nvrrp_script x {": must be a network interface name`},
		{name: "outside the machine networks", config: racks, list: head + node("master-0", "198.51.100.11") + node("worker-c0", "192.0.2.21", "2001:db8::21"),
			want: `items[1].status.addresses: Invalid value: "192.0.2.21, 2001:db8::21": no address of node worker-c0 is inside spec.machineNetworks (198.51.100.0/24, 203.0.113.0/24) of examples/bgp-two-racks.yaml: VRRP speaks from the node's address in the VIPs' network`},
		{name: "a node at a BGP peer's address", config: racks, list: head + node("master-0", "198.51.100.11") + node("worker-b0", "203.0.113.1"),
			want: `items[1].status.addresses[0].address: Invalid value: "203.0.113.1": is spec.bgp.peers[1].address of examples/bgp-two-racks.yaml: node worker-b0 would be its own BGP peer`},
		{name: "every problem at once", list: head + node("master-0", "198.51.100.11") + node("master-1", "198.51.100.11") + node("master-1", "x"),
			want: "3 invalid field(s):\n" +
				"  items[1].status.addresses[0].address: Invalid value: \"198.51.100.11\": also the address of node master-0 (items[0].status.addresses[0].address): the node would be its own VRRP peer and haproxy would list one host twice\n" +
				"  items[2].metadata.name: Duplicate value: \"master-1 (also items[1])\"\n" +
				"  items[2].status.addresses[0].address: Invalid value: \"x\": not an IP address"},
		{name: "values of the wrong kind, in the file's words, with their indices", list: head + "- metadata: {name: a}\n  status: {addresses: \"198.51.100.11\"}\n- metadata: {name: [b]}\n  status: {addresses: [{type: InternalIP, address: 5}]}\n",
			want: "3 invalid field(s):\n" +
				"  items[0].status.addresses: Invalid value: \"198.51.100.11\": must be a list, not a string\n" +
				"  items[1].metadata.name: Invalid value: must be a string, not a list\n" +
				"  items[1].status.addresses[0].address: Invalid value: 5: must be a string, not a number (quote it)"},
		{name: "items not a list", list: "apiVersion: v1\nkind: List\nitems: {name: master-0}\n", want: "items: Invalid value: must be a list, not a mapping"},
		{name: "a List of Services", list: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: web}\n  spec: {type: LoadBalancer, ports: [{port: 80}]}\n",
			want: `items[0].kind: "Service": a List of Service objects, not of Nodes; want a NodeList`},
		{name: "a List of Pods whose fields do not fit a Node", list: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: web}\n  spec: {podCIDR: [1]}\n",
			want: `items[0].kind: "Pod": a List of Pod objects, not of Nodes`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "nodes.yaml")
			if err := os.WriteFile(path, []byte(tc.list), 0o644); err != nil {
				t.Fatal(err)
			}
			in := Input{Path: path, Interface: "br-ex"}
			if tc.config != "" {
				in.Config, in.ConfigPath = fixture.Example(t, filepath.Base(tc.config)), "examples/"+filepath.Base(tc.config)
			}
			_, err := in.Load()
			got := ""
			if err != nil {
				got = strings.TrimPrefix(err.Error(), path+": ")
				if got == err.Error() {
					t.Errorf("the error does not start with the file's name: %v", err)
				}
				got = strings.TrimPrefix(got, "1 invalid field(s):\n  ")
			}
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) || tc.want != "" && got == "" {
				t.Errorf("got:\n%s\nwant (a prefix):\n%s", got, tc.want)
			}
		})
	}
}
