package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestForgedAdvertsDoNotTakeTheAPIVIP: a host on the LAN that is no node
// runs its own keepalived for the API VIP's VRID at priority 254, unicast
// to every node, the way an attacker (or a misconfigured appliance)
// would. The nodes count only their listed peers' adverts
// (check_unicast_src), so the holder keeps the VIP and no node gives it
// up. Without that check the holder yields to the higher priority at once.
func TestForgedAdvertsDoNotTakeTheAPIVIP(t *testing.T) {
	nodes := masters(2)
	lc := lab.Start(t, clusterYAML("fast", "unicast", ""), nodes)
	holder := lc.Settled(apiVIP)

	ids, err := vrid.ForCluster(lc.Config)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, n := range lc.Nodes {
		peers = append(peers, "        "+n.Addr)
	}
	const rogueAddr = "198.51.100.66"
	conf := fmt.Sprintf(`global_defs {
    router_id rogue
}
vrrp_instance forged {
    state MASTER
    interface br-ex
    version 3
    virtual_router_id %d
    priority 254
    advert_int %s
    unicast_src_ip %s
    unicast_peer {
%s
    }
    virtual_ipaddress {
        %s/32 dev br-ex
    }
}
`, ids[v1alpha1.KeyAPI], strings.TrimSuffix(fmt.Sprint(lc.Config.Spec.VRRP.Advert().Seconds()), ".0"), rogueAddr, strings.Join(peers, "\n"), apiVIP)
	p := startStrangerKeepalived(t, lc, "rogue", rogueAddr, conf, 1)

	// Master_Down at the fast profile is well under a second; watch for
	// several of them.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got := lc.Holders(apiVIP); !slices.Equal(got, []string{holder}) {
			t.Fatalf("forged adverts moved the API VIP: node holders %v, was %s\nrogue log:\n%s", got, holder, p.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startStrangerKeepalived runs keepalived with conf on a new host of the
// machine network that is no node (name, at addr/24), and waits until
// masters of its instances advertise as master.
func startStrangerKeepalived(t *testing.T, lc *lab.Cluster, name, addr, conf string, masters int) *netlab.Proc {
	t.Helper()
	dir, err := os.MkdirTemp("", "vipctl-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Laid out like a node, so it starts with the static pod's own
	// command line.
	path := filepath.Join(dir, onnode.KeepalivedConfPath)
	for _, d := range []string{filepath.Dir(path), filepath.Join(dir, onnode.RunDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h := lc.AddHost(name, netlab.HostOpts{Iface: "br-ex", Addrs: []string{addr + "/24"}})
	p := h.Start("keepalived", keepalived.Args(dir)...)
	t.Cleanup(p.Stop)
	lab.WaitFor(t, 10*time.Second, fmt.Sprintf("%d instance(s) of the %s keepalived advertising as master", masters, name), func() bool {
		return strings.Count(p.LogTail(200), "Entering MASTER STATE") >= masters
	})
	return p
}
