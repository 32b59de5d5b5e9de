package e2e

import (
	"net/netip"
	"testing"
	"time"
)

// TestPoolConfigsDisagreeWithoutSplitBrain: two pool nodes whose sidecars
// disagree on the pool's Service addresses (one has seen a new Service,
// the other not yet, or cannot reach the API) still elect one holder per
// instance. keepalived ignores an advert whose address count differs from
// its own, so with the Service addresses in the adverts both nodes became
// master of every address they shared; the adverts now carry only the
// instance's constant anchor.
func TestPoolConfigsDisagreeWithoutSplitBrain(t *testing.T) {
	pools := `  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      nodeSelector: {pool: web}
      instances: 1
`
	specs := []nodeSpec{
		{name: "master-0", addr: "198.51.100.11/24", controlPlane: true},
		{name: "master-1", addr: "198.51.100.12/24", controlPlane: true},
		{name: "worker-0", addr: "198.51.100.21/24", labels: map[string]string{"pool": "web"}},
		{name: "worker-1", addr: "198.51.100.22/24", labels: map[string]string{"pool": "web"}},
	}
	lc := startCluster(t, clusterYAML("fast", "unicast", pools), specs)
	shared := netip.MustParseAddr("198.51.100.130")
	lc.stateAddVIP("web", shared)
	for _, n := range lc.nodes {
		lc.apply(n)
	}
	holder := lc.settled(shared.String())

	// Only the holder learns of a second Service address.
	lc.stateAddVIP("web", netip.MustParseAddr("198.51.100.131"))
	lc.apply(lc.byName[holder])
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if h := lc.holders(shared.String()); len(h) != 1 {
			t.Fatalf("%s held by %v while the pool nodes' configs disagree: split brain", shared, h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := lc.holders("198.51.100.131"); len(h) != 1 || h[0] != holder {
		t.Errorf("the new address is held by %v, want %s", h, holder)
	}
}
