package runtimecfg

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// TestServiceWithoutVRIDDegradesAlone: when the Local Services need more
// VRRP IDs than remain, the newest is left out (reported, not announced)
// and every other VIP keeps rendering and following changes. This used to
// fail the whole render on every node, freezing every VIP's config.
func TestServiceWithoutVRIDDegradesAlone(t *testing.T) {
	c, st := loadExample(t)
	ids, err := vrid.ForCluster(c)
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint8]bool{}
	for _, id := range ids {
		used[id] = true
	}
	spare := false
	for id := 1; id <= 255; id++ {
		if used[uint8(id)] {
			continue
		}
		if !spare {
			spare = true // the one ID left for Services
			continue
		}
		c.Spec.VRRP.AvoidVirtualRouterIDs = append(c.Spec.VRRP.AvoidVirtualRouterIDs, id)
	}
	both := []string{"master-0", "master-1"}
	st.LocalServices = []cluster.LocalService{
		{Name: "shop/old", Pool: "general", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.130")}, Nodes: both},
		{Name: "shop/new", Pool: "general", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.131")}, Nodes: both},
	}
	conf := func(d NodeState) string {
		for _, f := range d.Files {
			if f.Path == onnode.KeepalivedConfPath {
				return string(f.Data)
			}
		}
		t.Fatal("no keepalived.conf")
		return ""
	}

	d, err := DesiredNode(cluster.Compile(c), st, "master-0", "")
	if err != nil {
		t.Fatalf("one Service too many failed the whole render: %v", err)
	}
	k := conf(d)
	for _, want := range []string{"vrrp_instance api_v4", "vrrp_instance ingress_v4", "vrrp_instance service_4_shop_old_v4"} {
		if !strings.Contains(k, want) {
			t.Errorf("keepalived.conf lacks %s", want)
		}
	}
	if strings.Contains(k, "shop_new") {
		t.Error("the Service without an ID was rendered")
	}
	if len(d.Unannounced) != 1 || d.Unannounced[0].Name != "shop/new" {
		t.Errorf("Unannounced = %+v, want shop/new", d.Unannounced)
	}

	// The rest still follows the cluster: a new API VIP and a new pool
	// address reach the config while shop/new is still left out.
	c.Spec.API.VIPs = []string{"198.51.100.7"}
	st.ServiceVIPs = map[string][]netip.Addr{"general": {netip.MustParseAddr("198.51.100.140")}}
	d, err = DesiredNode(cluster.Compile(c), st, "master-0", "")
	if err != nil {
		t.Fatal(err)
	}
	k = conf(d)
	for _, want := range []string{"198.51.100.7/32 dev br-ex", "198.51.100.140/32 dev br-ex", "service_4_shop_old_v4"} {
		if !strings.Contains(k, want) {
			t.Errorf("after the change keepalived.conf lacks %s", want)
		}
	}
}

// TestLocalStatusWaitsForTheProxy: a ready endpoint the node's service
// proxy does not deliver to yet holds the VIP at priority 1 (draining's
// value), never more; a node held back (not synced) has no endpoint at
// all; the other states are the EndpointSlices' alone.
func TestLocalStatusWaitsForTheProxy(t *testing.T) {
	ls := cluster.LocalService{Name: "shop/web", Nodes: []string{"ready"}, Draining: []string{"stopping"}}
	pending := map[string]bool{"shop/web": true}
	for _, c := range []struct {
		node     string
		pending  map[string]bool
		heldBack bool
		want     int
	}{
		{"ready", nil, false, onnode.LocalReady},
		{"ready", pending, false, onnode.LocalDraining},
		{"ready", map[string]bool{"shop/other": true}, false, onnode.LocalReady},
		{"stopping", pending, false, onnode.LocalDraining},
		{"none", pending, false, onnode.LocalNone},
		{"none", nil, false, onnode.LocalNone},
		{"ready", nil, true, onnode.LocalNone},
		{"stopping", nil, true, onnode.LocalNone},
	} {
		if got := localStatus(ls, c.node, c.pending, c.heldBack); got != c.want {
			t.Errorf("%s, pending %v, held back %t: %d, want %d", c.node, c.pending, c.heldBack, got, c.want)
		}
	}
}
