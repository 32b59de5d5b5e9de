package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/lab"
)

// TestSidecarCountsForeignVRRPRouter: two control-plane nodes with their
// sidecars (node credentials, real apiserver, real keepalived, unicast).
// The backup's tap hears the holder's API adverts, which do not count.
// Then a keepalived on a host of the LAN that is no node advertises the
// cluster's API VRRP ID (multicast, as another cluster or an appliance
// would) and an ID the cluster does not use: on both nodes
// vipctl_vrrp_foreign_adverts_total rises for the API ID from that host
// only, and each Node gets one ForeignVRRPRouter Event, not one per
// advert.
func TestSidecarCountsForeignVRRPRouter(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", ""), masters(2))
	kc.GrantNodeReaders(t)
	// Not 5 minutes: the proposal below comes after the stranger's first
	// seconds.
	kc.ClashProposeAfter = 5 * time.Second
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	holder := kc.Settled(apiVIP)
	backup := "master-0"
	if holder == backup {
		backup = "master-1"
	}
	w := watchAlerts(t, kc.Config, sidecarTargets(kc)...)
	w.expect("the cluster's own adverts only")
	received := func(node string) float64 {
		return testutil.ToFloat64(kc.Sidecars[node].Metrics.VRRP.Received.WithLabelValues("ipv4"))
	}
	lab.WaitFor(t, 30*time.Second, backup+"'s tap hearing the holder's adverts", func() bool { return received(backup) >= 10 })
	for _, n := range kc.Nodes {
		if c := testutil.CollectAndCount(kc.Sidecars[n.Name].Metrics.VRRP.Foreign); c != 0 {
			t.Fatalf("%s counts foreign adverts among the cluster's own: %d series", n.Name, c)
		}
	}

	ids, err := vrid.ForCluster(kc.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := ids[v1alpha1.KeyAPI]
	// The stranger's other instance takes the ID a proposal would give
	// the API without listening: unused by the cluster, so it must not
	// count as foreign, and heard on the segment, so it must not be
	// proposed.
	deaf, err := vrid.ProposeOverrides(vrid.RequestFor(kc.Config), []vrid.Clash{{ID: api, Key: vrid.Key(v1alpha1.KeyAPI)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	unused := deaf[vrid.Key(v1alpha1.KeyAPI)]
	const stranger = "198.51.100.66"
	conf := fmt.Sprintf(`global_defs {
    router_id stranger
}
vrrp_instance clash {
    state MASTER
    interface br-ex
    version 3
    virtual_router_id %d
    priority 100
    advert_int 0.2
    virtual_ipaddress {
        198.51.100.60/32 dev br-ex
    }
}
vrrp_instance elsewhere {
    state MASTER
    interface br-ex
    version 3
    virtual_router_id %d
    priority 100
    advert_int 0.2
    virtual_ipaddress {
        198.51.100.61/32 dev br-ex
    }
}
`, api, unused)
	p := startStrangerKeepalived(t, kc.Cluster, "stranger", stranger, conf, 2)

	labels := []string{strconv.Itoa(int(api)), "ipv4", stranger}
	for _, n := range kc.Nodes {
		m := kc.Sidecars[n.Name].Metrics
		lab.WaitFor(t, 20*time.Second, n.Name+" counting the stranger's adverts", func() bool {
			return testutil.ToFloat64(m.VRRP.Foreign.WithLabelValues(labels...)) >= 10
		})
		if c := testutil.CollectAndCount(m.VRRP.Foreign); c != 1 {
			t.Errorf("%s: %d foreign series, want only %v", n.Name, c, labels)
		}
		if seen := testutil.ToFloat64(m.VRRP.ForeignLastSeen.WithLabelValues(labels...)); time.Since(time.Unix(int64(seen), 0)) > time.Minute {
			t.Errorf("%s: the stranger last seen at %v", n.Name, seen)
		}
	}
	if got := kc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
		t.Errorf("the API VIP moved to %v; the stranger's adverts must change nothing\nstranger's log:\n%s", got, p.LogTail(20))
	}

	// The Events go out asynchronously: wait for both, then make sure
	// the adverts since added none.
	events := func() map[string]int {
		list, err := kc.Admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + sidecar.ReasonForeignVRRPRouter})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]int{}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind != "Node" || !strings.Contains(e.Message, " by "+stranger+" ") || !strings.HasPrefix(e.Message, fmt.Sprintf("VRRP ID %d of this cluster (api) ", api)) {
				t.Errorf("unexpected Event on %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
			by[e.InvolvedObject.Name] += int(e.Count)
		}
		return by
	}
	lab.WaitFor(t, 20*time.Second, "a ForeignVRRPRouter Event on each Node", func() bool { return len(events()) == len(kc.Nodes) })
	before := testutil.ToFloat64(kc.Sidecars[backup].Metrics.VRRP.Foreign.WithLabelValues(labels...))
	lab.WaitFor(t, 20*time.Second, "ten more adverts of the stranger", func() bool {
		return testutil.ToFloat64(kc.Sidecars[backup].Metrics.VRRP.Foreign.WithLabelValues(labels...)) >= before+10
	})
	for node, n := range events() {
		if n != 1 {
			t.Errorf("%s: %d ForeignVRRPRouter Events, want 1", node, n)
		}
	}

	// The rendered alert names the ID and the stranger, once for all the
	// nodes that hear it; it resolves once the stranger is quiet for
	// long enough (3 minutes, alertWindow here).
	// Every node proposes one ID for the API, the same, free of the
	// cluster's IDs and of the stranger's other one.
	var proposed string
	lab.WaitFor(t, 30*time.Second, "a VRRPIDProposed Event on each Node", func() bool {
		list, err := kc.Admin.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + sidecar.ReasonVRRPIDProposed})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, e := range list.Items {
			nodes[e.InvolvedObject.Name] = true
			proposed = e.Message
		}
		return len(nodes) == len(kc.Nodes)
	})
	t.Logf("proposal: %s", proposed)
	for _, n := range kc.Nodes {
		series := kc.Sidecars[n.Name].Metrics.VRRP.ClashProposed
		id := uint8(testutil.ToFloat64(series.WithLabelValues(string(v1alpha1.KeyAPI), strconv.Itoa(int(api)))))
		if id == 0 || id == unused || slices.Contains(slices.Collect(maps.Values(ids)), id) {
			t.Errorf("%s proposes ID %d for the API: want one neither the cluster's (%v) nor the stranger's other (%d)", n.Name, id, ids, unused)
		}
		if want := fmt.Sprintf("pin spec.vrrp.virtualRouterIDs {api: %d}", id); !strings.Contains(proposed, want) {
			t.Errorf("%s: proposes %d; an Event says:\n%s", n.Name, id, proposed)
		}
		if c := testutil.CollectAndCount(series); c != 1 {
			t.Errorf("%s: %d proposal series, want the API's alone", n.Name, c)
		}
	}

	w.expect("the stranger advertising", fmt.Sprintf("VipctlForeignVRRPRouter vrid=%d source=%s", api, stranger))
	p.Stop()
	w.expect("the stranger stopped")
}

// TestSidecarOwnMulticastAdvertsNotForeign: in multicast mode, dual
// stack, the members' IPv6 adverts come from link-local addresses (RFC
// 5798), which name no node; every node's tap hears the masters' adverts
// of both families, and none counts as foreign.
func TestSidecarOwnMulticastAdvertsNotForeign(t *testing.T) {
	yaml, specs := multicastDualStack(2)
	kc := lab.StartKube(t, yaml, specs)
	kc.GrantNodeReaders(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	// Each family's master advertises; the other node hears it.
	for family, vip := range map[string]string{"ipv4": apiVIP, "ipv6": "2001:db8:100::5"} {
		holder := kc.Settled(vip)
		for _, n := range kc.Nodes {
			if n.Name == holder {
				continue
			}
			m := kc.Sidecars[n.Name].Metrics
			lab.WaitFor(t, 30*time.Second, n.Name+"'s tap hearing "+holder+"'s "+family+" adverts", func() bool {
				return testutil.ToFloat64(m.VRRP.Received.WithLabelValues(family)) >= 10
			})
		}
	}
	for _, n := range kc.Nodes {
		if c := testutil.CollectAndCount(kc.Sidecars[n.Name].Metrics.VRRP.Foreign); c != 0 {
			t.Errorf("%s counts the cluster's own multicast adverts as foreign: %d series", n.Name, c)
		}
	}
}
