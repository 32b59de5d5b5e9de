package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/internal/netlab"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// TestForgedAdvertsDoNotTakeTheAPIVIP: a host on the LAN that is no node
// runs its own keepalived for the API VIP's VRID at priority 254, unicast
// to every node, the way an attacker (or a misconfigured appliance)
// would. The nodes count only their listed peers' adverts
// (check_unicast_src), so the holder keeps the VIP and no node gives it
// up. Without that check the holder yields to the higher priority at once.
func TestForgedAdvertsDoNotTakeTheAPIVIP(t *testing.T) {
	nodes := masters(2)
	lc := startCluster(t, clusterYAML("fast", "unicast", ""), nodes)
	holder := lc.settled(apiVIP)

	ids, err := vrid.ForCluster(lc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, n := range lc.nodes {
		peers = append(peers, "        "+n.addr)
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
`, ids[v1alpha1.KeyAPI], strings.TrimSuffix(fmt.Sprint(lc.cfg.Spec.VRRP.Advert().Seconds()), ".0"), rogueAddr, strings.Join(peers, "\n"), apiVIP)
	dir, err := os.MkdirTemp("", "vipctl-rogue-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	rogue := lc.lab.AddHost("rogue", netlab.HostOpts{Iface: "br-ex", Addrs: []string{rogueAddr + "/24"}})
	p := rogue.Start("keepalived", "keepalived", "-n", "-l", "-D", "-G", "-f", path,
		"-p", filepath.Join(dir, "k.pid"), "-r", filepath.Join(dir, "v.pid"), "-c", filepath.Join(dir, "c.pid"))
	t.Cleanup(p.Stop)
	waitFor(t, 10*time.Second, "the rogue keepalived advertising as master", func() bool {
		return strings.Contains(p.LogTail(50), "Entering MASTER STATE")
	})

	// Master_Down at the fast profile is well under a second; watch for
	// several of them.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got := lc.holders(apiVIP); !slices.Equal(got, []string{holder}) {
			t.Fatalf("forged adverts moved the API VIP: node holders %v, was %s\nrogue log:\n%s", got, holder, p.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
