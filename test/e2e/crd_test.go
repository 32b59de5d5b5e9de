package e2e

// The ClusterVIPs CustomResourceDefinition (pkg/manifests/crds/, generated
// from pkg/apis/v1alpha1/crd) against a real kube-apiserver: the shipped
// examples are accepted and defaulted as vipctl defaults them, the
// held-out bad cluster files are refused at their fields or listed as
// what only `vipctl validate` checks (docs/api.md has the same list), each
// schema and CEL rule refuses what vipctl refuses at the same field, and
// every field oc explain shows has a description.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// crdBadInput classifies every cluster file of testdata/bad-input: the
// fields the apiserver refuses it at, or why only `vipctl validate`
// refuses it (docs/api.md, "What only vipctl validate checks").
var crdBadInput = map[string]struct {
	refusedAt    []string
	validateOnly string
}{
	// The schema's maxItems stops it before the CEL rules run, so the
	// apiserver names the list, not each entry, and not the allowed
	// sources that are no CIDRs (refused at their entries once the list
	// is short enough: TestCRD/rules).
	"api-int.yaml":           {refusedAt: []string{"spec.api.internalVIPs"}},
	"external-ips-open.yaml": {refusedAt: []string{"spec.servicePools[0].namespaces"}},
	"instances-zero.yaml":    {refusedAt: []string{"spec.servicePools[0].instances"}},
	"internal-allowed-internet.yaml": {refusedAt: []string{
		"spec.api.internalAllowedSources[1]", "spec.api.internalAllowedSources[2]",
	}},
	"kinds-wrong.yaml": {refusedAt: []string{"spec.baseDomain", "spec.api.port", "spec.bgp.peers[1].bfd"}},
	// The 64-character label only: the shard on the default
	// IngressController's derived domain is validate's (a CEL rule that
	// builds apps.<name>.<baseDomain> exceeds the apiserver's cost budget).
	"names-too-long.yaml":       {refusedAt: []string{"spec.ingress[2].domain"}},
	"load-balancer-class.yaml":  {refusedAt: []string{"spec.loadBalancerClass.name"}},
	"pools-only-with-vips.yaml": {refusedAt: []string{"spec.api", "spec.ingress"}},
	"vip-network-address.yaml":  {refusedAt: []string{"spec.api.vips"}},

	"avoid-openshift-api-id.yaml":      {validateOnly: "OpenShift's own VRRP IDs are derived from the cluster name (vipctl vr-ids): no CEL function computes them"},
	"pools-only-pin-openshift-id.yaml": {validateOnly: "OpenShift's own VRRP IDs are derived from the cluster name (vipctl vr-ids): no CEL function computes them"},
	"bgp-peers.yaml":                   {validateOnly: "the special-purpose address blocks (multicast, loopback; docs/config-reference.md) are a table in Go, and a peer inside a pool or on a VIP compares ranges across lists"},
	"node-addresses.yaml":              {validateOnly: "needs the node list (validate --nodes, render --nodes)"},
	"pool-broadcast.yaml":              {validateOnly: "a machine network's IPv4 broadcast address inside a pool: CEL's cidr library names no last address"},
	"ports-taken.yaml":                 {validateOnly: "the ports the nodes already bind (docs/config-reference.md) are a table in Go; a copy in the CRD would drift"},
	"two-documents.yaml":               {validateOnly: "a property of the file: oc apply -f sends each document as an object of its own"},
}

func TestCRD(t *testing.T) {
	t.Parallel()
	s := testapiserver.Start(t)
	s.InstallCRDs(t, fixture.Repo(manifests.ClusterVIPsCRDPath))
	client, err := dynamic.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &crdClient{r: client.Resource(schema.GroupVersionResource{Group: "vipctl.io", Version: "v1alpha1", Resource: "clustervips"})}

	t.Run("examples", func(t *testing.T) { crdExamples(t, c) })
	t.Run("bad-input", func(t *testing.T) { crdBadInputs(t, c) })
	t.Run("rules", func(t *testing.T) { crdRuleCases(t, c) })
	t.Run("accepted", func(t *testing.T) { crdAccepted(t, c) })
	t.Run("every-rule-proven", func(t *testing.T) { crdEveryRuleProven(t, c) })
	t.Run("status", func(t *testing.T) { crdStatus(t, c.r) })
	t.Run("descriptions", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(s.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		crdDescriptions(t, cs)
	})
}

// crdExamples: every shipped example is accepted as an object, and the
// apiserver's defaults are vipctl's (SetDefaults changes nothing the
// schema already filled in, and the schema fills in nothing else).
func crdExamples(t *testing.T, c *crdClient) {
	paths, err := filepath.Glob(fixture.Repo("examples/*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			obj := fixture.ReadObject(t, path)
			got, err := c.dryRun(obj)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			file, err := v1alpha1.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			served := toFile(t, got)
			v1alpha1.SetDefaults(served)
			if !reflect.DeepEqual(served.Spec, file.Spec) {
				a, _ := json.Marshal(file.Spec)
				b, _ := json.Marshal(served.Spec)
				t.Errorf("defaulted by the apiserver and then by vipctl:\n%s\ndefaulted by vipctl:\n%s", b, a)
			}
		})
	}
}

// crdBadInputs: each bad cluster file is refused at its fields, or
// accepted and listed as validate's alone; a new one must be classified.
func crdBadInputs(t *testing.T, c *crdClient) {
	paths, err := filepath.Glob(fixture.Repo("testdata/bad-input/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range paths {
		name := filepath.Base(path)
		obj := fixture.ReadObject(t, path)
		if obj.GetKind() != v1alpha1.Kind {
			continue // a node list, an installer file
		}
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := crdBadInput[name]
			if !ok {
				t.Fatal("not in crdBadInput: say where the apiserver refuses it, or why only vipctl validate does (and add it to docs/api.md)")
			}
			_, err := c.dryRun(obj)
			if want.validateOnly != "" {
				if err != nil {
					t.Fatalf("listed as checked by vipctl validate only (%s), but the apiserver refuses it: %v", want.validateOnly, err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			fields := causeFields(t, err)
			for _, f := range want.refusedAt {
				if !slices.Contains(fields, f) {
					t.Errorf("no error at %s: %v", f, err)
				}
			}
		})
	}
	for name := range crdBadInput {
		if !seen[name] {
			t.Errorf("crdBadInput lists %s, which is no cluster file in testdata/bad-input", name)
		}
	}
}

// crdRule is one change to a valid example that vipctl refuses: the
// apiserver must refuse it too, at the field vipctl names or its parent
// (a CEL rule over a list names the list).
type crdRule struct {
	name, example string
	edit          func(spec map[string]any)
	at            string
}

var crdRules = []crdRule{
	{"full mode needs an API VIP", "compact-ipv4.yaml", func(s map[string]any) { delete(s, "api") }, "spec.api.vips"},
	{"poolsOnly takes no bootstrap host", "pools-only.yaml", func(s map[string]any) {
		s["bootstrap"] = map[string]any{"addresses": []any{"198.51.100.9"}}
	}, "spec.bootstrap"},
	{"a bgp pool needs spec.bgp", "compact-ipv4.yaml", func(s map[string]any) { pool(s, 0)["mode"] = "bgp" }, "spec.bgp"},
	{"an API VIP outside the machine networks", "compact-ipv4.yaml", func(s map[string]any) {
		api(s)["vips"] = []any{"203.0.113.5"}
	}, "spec.api.vips"},
	{"two API VIPs of one family", "compact-ipv4.yaml", func(s map[string]any) {
		api(s)["vips"] = []any{"198.51.100.5", "198.51.100.4"}
	}, "spec.api.vips"},
	{"no IP address", "compact-ipv4.yaml", func(s map[string]any) { api(s)["vips"] = []any{"198.51.100.300"} }, "spec.api.vips[0]"},
	{"an IPv6 zone", "dual-stack.yaml", func(s map[string]any) { api(s)["vips"] = []any{"198.51.100.5", "2001:db8:100::5%eth0"} }, "spec.api.vips[1]"},
	{"an api-int VIP outside the machine networks", "api-int.yaml", func(s map[string]any) {
		api(s)["internalVIPs"] = []any{"203.0.113.4"}
	}, "spec.api.internalVIPs"},
	{"an api-int VIP of a family the API has none of", "api-int.yaml", func(s map[string]any) {
		api(s)["vips"] = []any{"198.51.100.5"}
		api(s)["internalVIPs"] = []any{"2001:db8:100::4"}
	}, "spec.api.internalVIPs"},
	{"allowed sources that are no CIDR", "api-int.yaml", func(s map[string]any) {
		api(s)["internalAllowedSources"] = []any{"198.51.100.0/24", "nodes"}
	}, "spec.api.internalAllowedSources[1]"},
	{"allowed sources without anything to guard", "compact-ipv4.yaml", func(s map[string]any) {
		delete(api(s), "internalPort")
		api(s)["internalAllowedSources"] = []any{"198.51.100.0/24"}
	}, "spec.api.internalAllowedSources"},
	{"internalLoadBalancerPort without internalPort", "compact-ipv4.yaml", func(s map[string]any) {
		delete(api(s), "internalPort")
		api(s)["internalLoadBalancerPort"] = int64(22625)
	}, "spec.api.internalLoadBalancerPort"},
	{"haproxy on kube-apiserver's port", "compact-ipv4.yaml", func(s map[string]any) {
		api(s)["loadBalancerPort"] = int64(6443)
	}, "spec.api"},
	{"a port out of range", "compact-ipv4.yaml", func(s map[string]any) { api(s)["healthPort"] = int64(70000) }, "spec.api.healthPort"},
	{"a bootstrap address of a family the API has no VIP of", "day1-bootstrap.yaml", func(s map[string]any) {
		s["bootstrap"] = map[string]any{"addresses": []any{"198.51.100.9", "2001:db8:100::9"}}
	}, "spec.bootstrap.addresses"},
	{"a bootstrap host without an address of the API VIP's family", "dual-stack.yaml", func(s map[string]any) {
		s["bootstrap"] = map[string]any{"addresses": []any{"198.51.100.9"}}
	}, "spec.bootstrap.addresses"},
	{"a shard without a domain", "ingress-shards.yaml", func(s map[string]any) { delete(ingress(s, 1), "domain") }, "spec.ingress[1].domain"},
	{"two shards on one domain", "ingress-shards.yaml", func(s map[string]any) {
		ingress(s, 2)["domain"] = ingress(s, 1)["domain"]
	}, "spec.ingress"},
	{"two IngressControllers of one name", "ingress-shards.yaml", func(s map[string]any) { ingress(s, 2)["name"] = "internal" }, "spec.ingress[2]"},
	{"an IngressController name no DNS label", "ingress-shards.yaml", func(s map[string]any) { ingress(s, 1)["name"] = "Internal" }, "spec.ingress[1].name"},
	{"an ingress VIP outside the machine networks", "compact-ipv4.yaml", func(s map[string]any) {
		ingress(s, 0)["vips"] = []any{"203.0.113.6"}
	}, "spec.ingress"},
	{"an ingress VIP on the network address", "compact-ipv4.yaml", func(s map[string]any) {
		ingress(s, 0)["vips"] = []any{"198.51.100.0"}
	}, "spec.ingress"},
	{"interface and interfaceLabel", "own-interface.yaml", func(s map[string]any) { ingress(s, 1)["interface"] = "br-dmz" }, "spec.ingress[1].interfaceLabel"},
	{"an interface label no label key", "own-interface.yaml", func(s map[string]any) {
		ingress(s, 1)["interfaceLabel"] = "vipctl.io/partners/interface"
	}, "spec.ingress[1].interfaceLabel"},
	{"the interface ..", "own-interface.yaml", func(s map[string]any) { pool(s, 0)["interface"] = ".." }, "spec.servicePools[0].interface"},
	{"no interface name", "own-interface.yaml", func(s map[string]any) { pool(s, 0)["interface"] = "bridge-to-the-dmz" }, "spec.servicePools[0].interface"},
	{"a selector key no label key", "ingress-shards.yaml", func(s map[string]any) {
		ingress(s, 0)["nodeSelector"] = map[string]any{"role/worker/x": ""}
	}, "spec.ingress[0].nodeSelector"},
	{"two pools of one name", "pools-only.yaml", func(s map[string]any) { pool(s, 1)["name"] = "general" }, "spec.servicePools[1]"},
	{"a pool CIDR with host bits", "compact-ipv4.yaml", func(s map[string]any) {
		pool(s, 0)["addresses"] = []any{"198.51.100.129/26"}
	}, "spec.servicePools[0].addresses[0]"},
	{"a range of two families", "own-interface.yaml", func(s map[string]any) {
		pool(s, 0)["addresses"] = []any{"203.0.113.10-2001:db8:200::ff"}
	}, "spec.servicePools[0].addresses[0]"},
	{"announce on a bgp pool", "bgp-two-racks.yaml", func(s map[string]any) { pool(s, 0)["announce"] = "sidecar" }, "spec.servicePools[0].announce"},
	{"an unknown announce", "compact-ipv4.yaml", func(s map[string]any) { pool(s, 0)["announce"] = "frr" }, "spec.servicePools[0].announce"},
	{"an interface on a bgp pool", "bgp-two-racks.yaml", func(s map[string]any) { pool(s, 0)["interface"] = "br-dmz" }, "spec.servicePools[0].interface"},
	{"an interface label on a sidecar pool", "own-interface.yaml", func(s map[string]any) {
		delete(pool(s, 0), "interface")
		pool(s, 0)["interfaceLabel"] = "vipctl.io/dmz"
		pool(s, 0)["announce"] = "sidecar"
	}, "spec.servicePools[0].interfaceLabel"},
	{"too many instances", "compact-ipv4.yaml", func(s map[string]any) { pool(s, 0)["instances"] = int64(17) }, "spec.servicePools[0].instances"},
	{"one holder", "compact-ipv4.yaml", func(s map[string]any) { pool(s, 0)["maxHolders"] = int64(1) }, "spec.servicePools[0].maxHolders"},
	{"a negative cap", "compact-ipv4.yaml", func(s map[string]any) { pool(s, 0)["maxPerNamespace"] = int64(-1) }, "spec.servicePools[0].maxPerNamespace"},
	{"a namespace no DNS label", "own-interface.yaml", func(s map[string]any) { pool(s, 0)["namespaces"] = []any{"DMZ"} }, "spec.servicePools[0].namespaces[0]"},
	{"a machine network with host bits", "compact-ipv4.yaml", func(s map[string]any) {
		s["machineNetworks"] = []any{"198.51.100.1/24"}
	}, "spec.machineNetworks[0]"},
	{"an unknown mode", "compact-ipv4.yaml", func(s map[string]any) { s["mode"] = "apiOnly" }, "spec.mode"},
	{"the fast profile on VRRPv2", "multicast-fast.yaml", func(s map[string]any) { vrrp(s)["version"] = int64(2) }, "spec.vrrp.version"},
	{"a sub-second VRRPv2 advert", "compact-ipv4.yaml", func(s map[string]any) { vrrp(s)["advertInterval"] = "1500ms" }, "spec.vrrp.advertInterval"},
	{"a VRRPv3 advert under 10ms", "multicast-fast.yaml", func(s map[string]any) { vrrp(s)["advertInterval"] = "5ms" }, "spec.vrrp.advertInterval"},
	{"no duration", "compact-ipv4.yaml", func(s map[string]any) { vrrp(s)["advertInterval"] = "soon" }, "spec.vrrp.advertInterval"},
	{"an unknown VRRP mode", "compact-ipv4.yaml", func(s map[string]any) { vrrp(s)["mode"] = "broadcast" }, "spec.vrrp.mode"},
	{"VRRP version 4", "compact-ipv4.yaml", func(s map[string]any) { vrrp(s)["version"] = int64(4) }, "spec.vrrp.version"},
	{"two instances pinned to one ID", "compact-ipv4.yaml", func(s map[string]any) {
		vrrp(s)["virtualRouterIDs"] = map[string]any{"api": int64(7), "ingress": int64(7)}
	}, "spec.vrrp.virtualRouterIDs"},
	{"an ID out of range", "compact-ipv4.yaml", func(s map[string]any) {
		vrrp(s)["virtualRouterIDs"] = map[string]any{"api": int64(256)}
	}, "spec.vrrp.virtualRouterIDs"},
	{"an ID avoided and pinned", "compact-ipv4.yaml", func(s map[string]any) {
		vrrp(s)["virtualRouterIDs"] = map[string]any{"api": int64(7)}
		vrrp(s)["avoidVirtualRouterIDs"] = []any{int64(7)}
	}, "spec.vrrp.avoidVirtualRouterIDs"},
	{"an ID avoided twice", "compact-ipv4.yaml", func(s map[string]any) {
		vrrp(s)["avoidVirtualRouterIDs"] = []any{int64(7), int64(7)}
	}, "spec.vrrp.avoidVirtualRouterIDs[1]"},
	{"a hold time under 3s", "bgp-two-racks.yaml", func(s map[string]any) { peer(s, 0)["holdTime"] = "2s" }, "spec.bgp.peers[0].holdTime"},
	{"a keepalive as long as the hold time", "bgp-two-racks.yaml", func(s map[string]any) {
		peer(s, 0)["holdTime"] = "9s"
		peer(s, 0)["keepaliveTime"] = "9s"
	}, "spec.bgp.peers[0].keepaliveTime"},
	{"an eBGP multi-hop TTL of 1", "bgp-two-racks.yaml", func(s map[string]any) { peer(s, 0)["ebgpMultihop"] = int64(1) }, "spec.bgp.peers[0].ebgpMultihop"},
	{"eBGP multi-hop on an iBGP peer", "bgp-two-racks.yaml", func(s map[string]any) {
		s["bgp"].(map[string]any)["asn"] = peer(s, 0)["asn"]
		peer(s, 0)["ebgpMultihop"] = int64(2)
	}, "spec.bgp.peers"},
	{"a community out of range", "bgp-two-racks.yaml", func(s map[string]any) {
		s["bgp"].(map[string]any)["communities"] = []any{"64512:70000"}
	}, "spec.bgp.communities[0]"},
	{"ASN 0", "bgp-two-racks.yaml", func(s map[string]any) { s["bgp"].(map[string]any)["asn"] = int64(0) }, "spec.bgp.asn"},
	{"a routing policy on a vrrp pool", "compact-ipv4.yaml", func(s map[string]any) {
		pool(s, 0)["bgp"] = map[string]any{"asPathPrepend": int64(1)}
	}, "spec.servicePools[0].bgp"},
	{"a pool's peer that is no peer of spec.bgp", "bgp-two-racks.yaml", func(s map[string]any) {
		pool(s, 0)["bgp"] = map[string]any{"peers": []any{"198.51.100.9"}}
	}, "spec.servicePools"},
	{"a pool's peer of no address", "bgp-two-racks.yaml", func(s map[string]any) {
		pool(s, 0)["bgp"] = map[string]any{"peers": []any{"rack/a"}}
	}, "spec.servicePools[0].bgp.peers[0]"},
	{"a pool's community out of range", "bgp-two-racks.yaml", func(s map[string]any) {
		pool(s, 0)["bgp"] = map[string]any{"communities": []any{"1:70000"}}
	}, "spec.servicePools[0].bgp.communities[0]"},
	{"a pool's large community out of range", "bgp-two-racks.yaml", func(s map[string]any) {
		pool(s, 0)["bgp"] = map[string]any{"largeCommunities": []any{"4294967296:1:2"}}
	}, "spec.servicePools[0].bgp.largeCommunities[0]"},
	{"a peer of no address", "bgp-two-racks.yaml", func(s map[string]any) { peer(s, 1)["address"] = "rack-b" }, "spec.bgp.peers[1].address"},
	{"two peers of one address", "bgp-two-racks.yaml", func(s map[string]any) { peer(s, 1)["address"] = "198.51.100.1" }, "spec.bgp.peers"},
	{"a peer named by address and interface", "bgp-two-racks.yaml", func(s map[string]any) { peer(s, 0)["interface"] = "eth1" }, "spec.bgp.peers[0]"},
	{"a peer named by neither", "bgp-two-racks.yaml", func(s map[string]any) { delete(peer(s, 0), "address") }, "spec.bgp.peers[0]"},
	{"an unnumbered peer's interface that is an address", "bgp-two-racks.yaml", func(s map[string]any) {
		delete(peer(s, 0), "address")
		peer(s, 0)["interface"] = "198.51.100.7"
	}, "spec.bgp.peers[0].interface"},
	{"a routed API without spec.bgp", "compact-ipv4.yaml", func(s map[string]any) { api(s)["routed"] = true }, "spec.bgp"},
	{"a routed API over multicast VRRP", "bgp-two-racks.yaml", func(s map[string]any) {
		api(s)["routed"] = true
		vrrp(s)["mode"] = "multicast"
	}, "spec.vrrp.mode"},
	{"a bootstrap host's labels without a routed API", "bgp-two-racks.yaml", func(s map[string]any) {
		s["bootstrap"] = map[string]any{"addresses": []any{"198.51.100.40"}, "labels": map[string]any{"topology.kubernetes.io/zone": "rack-a"}}
	}, "spec.bootstrap.labels"},
	{"dualStack on an unnumbered peer", "bgp-two-racks.yaml", func(s map[string]any) {
		delete(peer(s, 0), "address")
		peer(s, 0)["interface"] = "eth1"
		peer(s, 0)["dualStack"] = true
	}, "spec.bgp.peers[0].dualStack"},
	{"eBGP multi-hop on an unnumbered peer", "bgp-two-racks.yaml", func(s map[string]any) {
		delete(peer(s, 0), "address")
		peer(s, 0)["interface"] = "eth1"
		peer(s, 0)["ebgpMultihop"] = int64(2)
	}, "spec.bgp.peers[0].ebgpMultihop"},
	{"an image reference with a space", "compact-ipv4.yaml", func(s map[string]any) {
		s["images"] = map[string]any{"keepalived": "quay.io/vipctl/vipctl:v1 --privileged"}
	}, "spec.images.keepalived"},
	{"an unknown monitoring stack", "compact-ipv4.yaml", func(s map[string]any) {
		s["monitoring"] = map[string]any{"stack": "datadog"}
	}, "spec.monitoring.stack"},
	{"an OpenShift release no major.minor", "compact-ipv4.yaml", func(s map[string]any) { s["openshiftRelease"] = "4.16.2" }, "spec.openshiftRelease"},
	{"a base domain no DNS name", "compact-ipv4.yaml", func(s map[string]any) { s["baseDomain"] = "example_test" }, "spec.baseDomain"},
}

// crdAcceptedEdits are edits of an example that vipctl accepts and the
// schema's rules must too: each reaches a rule's branch no example does.
var crdAcceptedEdits = []struct {
	name, example string
	edit          func(spec map[string]any)
}{
	{"an unnumbered peer before the one a pool names", "bgp-two-racks.yaml", func(s map[string]any) {
		b := child(s, "bgp")
		b["peers"] = append([]any{map[string]any{"interface": "eno2", "asn": int64(64514), "nodeSelector": map[string]any{"rack": "c"}}}, b["peers"].([]any)...)
		pool(s, 0)["bgp"] = map[string]any{"peers": []any{"203.0.113.1"}}
	}},
	{"a routed API VIP outside every machine network", "bgp-two-racks.yaml", func(s map[string]any) {
		api(s)["vips"] = []any{"203.0.113.150"}
		api(s)["routed"] = true
		s["machineNetworks"] = []any{"198.51.100.0/24", "203.0.113.0/26"}
		pool(s, 0)["addresses"] = []any{"203.0.113.224/28"}
	}},
	{"a routed API VIP with a bootstrap host in rack a", "bgp-two-racks.yaml", func(s map[string]any) {
		api(s)["vips"] = []any{"203.0.113.150"}
		api(s)["routed"] = true
		s["machineNetworks"] = []any{"198.51.100.0/24", "203.0.113.0/26"}
		pool(s, 0)["addresses"] = []any{"203.0.113.224/28"}
		s["bootstrap"] = map[string]any{"addresses": []any{"198.51.100.40"}, "labels": map[string]any{"topology.kubernetes.io/zone": "rack-a"}}
	}},
}

// crdAccepted: what vipctl accepts, the apiserver accepts.
func crdAccepted(t *testing.T, c *crdClient) {
	for _, ac := range crdAcceptedEdits {
		t.Run(ac.name, func(t *testing.T) {
			obj := fixture.ReadObject(t, fixture.Repo("examples/"+ac.example))
			spec, _ := obj.Object["spec"].(map[string]any)
			ac.edit(spec)
			if _, err := v1alpha1.Parse(fileBytes(t, obj)); err != nil {
				t.Fatalf("vipctl validate refuses it: %v", err)
			}
			if _, err := c.dryRun(obj); err != nil {
				t.Fatalf("the apiserver refuses what vipctl accepts: %v", err)
			}
		})
	}
}

// crdRules: each rule of the schema refuses what vipctl refuses, at the
// field vipctl names or its parent.
func crdRuleCases(t *testing.T, c *crdClient) {
	for _, rc := range crdRules {
		t.Run(rc.name, func(t *testing.T) {
			obj := fixture.ReadObject(t, fixture.Repo("examples/"+rc.example))
			spec, _ := obj.Object["spec"].(map[string]any)
			rc.edit(spec)

			_, verr := v1alpha1.Parse(fileBytes(t, obj))
			var invalid *v1alpha1.ValidationError
			if !errors.As(verr, &invalid) {
				t.Fatalf("vipctl validate: want field errors, got %v", verr)
			}
			if !slices.ContainsFunc(invalid.Errors, func(e *field.Error) bool { return within(e.Field, rc.at) }) {
				t.Fatalf("vipctl validate names no field at or under %s: %v", rc.at, verr)
			}

			_, err := c.dryRun(obj)
			if err == nil {
				t.Fatalf("the apiserver accepts what vipctl refuses: %v", verr)
			}
			if fields := causeFields(t, err); !slices.Contains(fields, rc.at) {
				t.Errorf("the apiserver names %q, not %s: %v", fields, rc.at, err)
			}
		})
	}
	t.Run("metadata.name", func(t *testing.T) {
		obj := fixture.ReadObject(t, fixture.Repo("examples/compact-ipv4.yaml"))
		obj.SetName("ostest.example")
		if _, err := v1alpha1.Parse(fileBytes(t, obj)); err == nil {
			t.Fatal("vipctl validate accepts it")
		}
		// A rule on the root may name no field of metadata: its message
		// does.
		_, err := c.dryRun(obj)
		if err == nil || !strings.Contains(err.Error(), "metadata.name is the OpenShift cluster name") {
			t.Fatalf("want the error about metadata.name, got %v", err)
		}
	})
}

// crdStatus: the status subresource takes what the later writers will
// write (holders, conditions, pool usage, node generations), and a
// change of the spec bumps the generation the nodes report against.
func crdStatus(t *testing.T, r dynamic.ResourceInterface) {
	ctx := context.Background()
	obj := fixture.ReadObject(t, fixture.Repo("examples/compact-ipv4.yaml"))
	created, err := r.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Delete(ctx, created.GetName(), metav1.DeleteOptions{}) }()
	now := metav1.Now()
	status := crd.ClusterVIPsStatus{
		ObservedGeneration: created.GetGeneration(),
		Conditions: []metav1.Condition{
			{Type: crd.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllHeld", Message: "every VIP has one holder", LastTransitionTime: now, ObservedGeneration: created.GetGeneration()},
			{Type: crd.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: now},
		},
		VIPs:  []crd.VIPStatus{{Address: "198.51.100.5", Instance: "api", Holder: "master-0", Since: &now}},
		Pools: []crd.PoolStatus{{Name: "general", InUse: 3, Free: 59}},
		Nodes: []crd.NodeStatus{{Name: "master-0", ObservedGeneration: created.GetGeneration()}},
	}
	raw, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = m
	updated, err := r.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	vips, _, _ := unstructured.NestedSlice(updated.Object, "status", "vips")
	if len(vips) != 1 || vips[0].(map[string]any)["holder"] != "master-0" {
		t.Errorf("status.vips after the update: %v", vips)
	}
	if updated.GetGeneration() != created.GetGeneration() {
		t.Errorf("a status update changed the generation: %d -> %d", created.GetGeneration(), updated.GetGeneration())
	}
	// The status subresource is the only way in: an update of the
	// object leaves the status alone.
	updated.Object["status"] = map[string]any{"pools": []any{map[string]any{"name": "general", "inUse": int64(0), "free": int64(0)}}}
	if err := unstructured.SetNestedField(updated.Object, "example.org", "spec", "baseDomain"); err != nil {
		t.Fatal(err)
	}
	again, err := r.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pools, _, _ := unstructured.NestedSlice(again.Object, "status", "pools")
	if len(pools) != 1 || pools[0].(map[string]any)["inUse"] != int64(3) {
		t.Errorf("status.pools after a spec update: %v", pools)
	}
	if again.GetGeneration() != updated.GetGeneration()+1 {
		t.Errorf("a spec update did not bump the generation: %d -> %d", updated.GetGeneration(), again.GetGeneration())
	}
}

// crdDescriptions: the apiserver's OpenAPI v3 for the group describes
// every field of the Go types, as oc explain shows them.
func crdDescriptions(t *testing.T, cs kubernetes.Interface) {
	// The apiserver publishes a new CRD's OpenAPI a moment after it is
	// established.
	var raw []byte
	err := testapiserver.WaitFor(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		raw, err = cs.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/vipctl.io/v1alpha1").DoRaw(ctx)
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]*openAPISchema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Components.Schemas["io.vipctl.v1alpha1.ClusterVIPs"]
	if root == nil {
		t.Fatalf("no schema io.vipctl.v1alpha1.ClusterVIPs among %d", len(doc.Components.Schemas))
	}
	resolve := func(s *openAPISchema) *openAPISchema {
		for s != nil && s.Ref == "" && len(s.AllOf) == 1 && len(s.Properties) == 0 {
			s = s.AllOf[0]
		}
		if s != nil && s.Ref != "" {
			return doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		}
		return s
	}
	var walk func(t reflect.Type, s *openAPISchema, path string)
	walk = func(typ reflect.Type, s *openAPISchema, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
			if s != nil && s.Items != nil {
				s = resolve(s.Items)
			}
		}
		// Kubernetes' own types (ObjectMeta, Condition, Time) are
		// described upstream.
		if typ.Kind() != reflect.Struct || strings.HasPrefix(typ.PkgPath(), "k8s.io/") {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || strings.HasPrefix(f.Type.PkgPath(), "k8s.io/") {
				continue
			}
			p := path + "." + name
			prop := resolve(s.Properties[name])
			if prop == nil {
				t.Errorf("%s: not in the served schema", p)
				continue
			}
			if strings.TrimSpace(s.Properties[name].Description) == "" && strings.TrimSpace(prop.Description) == "" {
				t.Errorf("%s: no description", p)
			}
			walk(f.Type, prop, p)
		}
	}
	walk(reflect.TypeFor[crd.ClusterVIPs](), root, "ClusterVIPs")
}

type openAPISchema struct {
	Description string                    `json:"description"`
	Ref         string                    `json:"$ref"`
	AllOf       []*openAPISchema          `json:"allOf"`
	Properties  map[string]*openAPISchema `json:"properties"`
	Items       *openAPISchema            `json:"items"`
}

// crdClient sends cluster files to the apiserver and keeps the messages
// of every refusal, so that TestCRD can tell which CEL rules its cases
// have shown at work.
type crdClient struct {
	r       dynamic.ResourceInterface
	refused []string
}

// dryRun sends a cluster file to the apiserver as a ClusterVIPs object,
// with strict field validation (as oc apply does) and without storing
// it, so that every file may carry the same name.
func (c *crdClient) dryRun(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got, err := c.r.Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			c.refused = append(c.refused, cause.Message)
		}
	}
	return got, err
}

// crdEveryRuleProven: every CEL rule of the CRD has refused something in
// the cases above (its message is in a refusal), so none is there
// untried, and a rule added to the types needs a case in crdRules.
func crdEveryRuleProven(t *testing.T, c *crdClient) {
	var doc any
	if err := yaml.Unmarshal(manifests.ClusterVIPsCRD(), &doc); err != nil {
		t.Fatal(err)
	}
	rules := 0
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k != "x-kubernetes-validations" {
					walk(e)
					continue
				}
				for _, rule := range e.([]any) {
					rules++
					msg, _ := rule.(map[string]any)["message"].(string)
					if !slices.ContainsFunc(c.refused, func(m string) bool { return strings.Contains(m, msg) }) {
						t.Errorf("no case shows this rule refusing anything: %q", msg)
					}
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	if rules == 0 {
		t.Fatal("the CRD has no CEL rule")
	}
}

// toFile reads an object the apiserver returned as vipctl reads a
// cluster file: its name, and its spec.
func toFile(t *testing.T, obj *unstructured.Unstructured) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Decode(fileBytes(t, obj))
	if err != nil {
		t.Fatalf("the served object is no cluster file: %v", err)
	}
	return c
}

// fileBytes is the cluster file of an object: apiVersion, kind, the
// name and the spec.
func fileBytes(t *testing.T, obj *unstructured.Unstructured) []byte {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"name": obj.GetName()},
		"spec":     obj.Object["spec"],
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// causeFields are the field paths of an apiserver's Invalid error.
func causeFields(t *testing.T, err error) []string {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("not a field error: %v", err)
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// within tells whether path is at or under parent
// (spec.api.vips[1] is under spec.api.vips and spec.api).
func within(path, parent string) bool {
	return path == parent || strings.HasPrefix(path, parent+".") || strings.HasPrefix(path, parent+"[")
}

func api(spec map[string]any) map[string]any { return child(spec, "api") }
func vrrp(spec map[string]any) map[string]any {
	return child(spec, "vrrp")
}
func ingress(spec map[string]any, i int) map[string]any { return item(spec, "ingress", i) }
func pool(spec map[string]any, i int) map[string]any    { return item(spec, "servicePools", i) }
func peer(spec map[string]any, i int) map[string]any {
	return item(child(spec, "bgp"), "peers", i)
}

// child is m[key] as a mapping, made when missing.
func child(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

func item(m map[string]any, key string, i int) map[string]any {
	list, _ := m[key].([]any)
	if i >= len(list) {
		panic(fmt.Sprintf("%s has no item %s", key, strconv.Itoa(i)))
	}
	return list[i].(map[string]any)
}
