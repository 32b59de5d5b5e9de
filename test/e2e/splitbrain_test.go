package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
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
	specs := []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true},
		{Name: "master-1", Addr: "198.51.100.12/24", ControlPlane: true},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}},
		{Name: "worker-1", Addr: "198.51.100.22/24", Labels: map[string]string{"pool": "web"}},
	}
	lc := lab.Start(t, clusterYAML("fast", "unicast", pools), specs)
	shared := netip.MustParseAddr("198.51.100.130")
	lc.AddServiceVIP("web", shared)
	for _, n := range lc.Nodes {
		lc.Apply(n)
	}
	holder := lc.Settled(shared.String())

	// Only the holder learns of a second Service address.
	lc.AddServiceVIP("web", netip.MustParseAddr("198.51.100.131"))
	lc.Apply(lc.ByName[holder])
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if h := lc.Holders(shared.String()); len(h) != 1 {
			t.Fatalf("%s held by %v while the pool nodes' configs disagree: split brain", shared, h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := lc.Holders("198.51.100.131"); len(h) != 1 || h[0] != holder {
		t.Errorf("the new address is held by %v, want %s", h, holder)
	}
}
