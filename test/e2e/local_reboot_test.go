package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
)

// localRebootPool is a pool on every node: a Local Service's instance
// then has exactly the nodes with a ready endpoint as members (no pad).
const localRebootPool = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
`

// TestRebootedNodeTakesNoStaleLocalVIP: a node reboots while its pod of a
// Local Service is evicted. Its last-good view still counts it an
// endpoint node; its peers, which followed the eviction, no longer count
// it a member of the Service's instance, so they send it no adverts and
// drop its own. Booting with the API still away (held back, rendered from
// that view), it must not take the VIP a peer holds: it heard nobody and
// did, and the clients that followed its gratuitous ARP lost 8 s in the
// cluster lab's rolling upgrade (2026-11-29). Its first sync, once the API
// answers, renders the truth. No request fails throughout.
func TestRebootedNodeTakesNoStaleLocalVIP(t *testing.T) {
	const vip = "198.51.100.152"
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", localRebootPool), sidecarSpecs())
	kc.GrantNodeReaders(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	svc := createLocalService(t, kc, "stale", vip)
	bootstrap := writeBootstrapNodes(t, kc.State.Nodes)
	ready := map[string]bool{"master-1": true, "worker-0": true, "worker-1": true}
	setEndpoints(t, kc.Admin, svc.Name, ready)
	holder := kc.WaitHolder(vip, 30*time.Second, func(string) bool { return true })
	var rebooted string
	for _, n := range []string{"worker-1", "worker-0"} {
		if n != holder {
			rebooted = n
			break
		}
	}
	status := filepath.Join(kc.ByName[rebooted].Target.Root, onnode.LocalServiceStatusFile("default/stale"))
	waitFile(t, status, "0\n")
	for n := range ready {
		kc.ByName[n].StartEcho(t, "0.0.0.0:8080")
	}
	// Its last-good view, written after the sync that wrote the status
	// file, counts it an endpoint node.
	lab.WaitFor(t, 10*time.Second, rebooted+"'s last-good view naming its endpoint", func() bool {
		lg, err := os.ReadFile(filepath.Join(kc.ByName[rebooted].Target.Root, onnode.LastGoodPath))
		return err == nil && strings.Contains(string(lg), `"`+rebooted+`"`)
	})
	p := kc.Poll("http://"+vip+":8080/", 10*time.Millisecond)

	// The power goes: keepalived and the sidecar end, /run is gone.
	kc.Sidecars[rebooted].Stop()
	kc.ByName[rebooted].Keepalived.Stop()
	if err := os.RemoveAll(filepath.Join(kc.ByName[rebooted].Target.Root, onnode.RunDir)); err != nil {
		t.Fatal(err)
	}
	// Meanwhile its pod is evicted: the peers render the instance
	// without it.
	delete(ready, rebooted)
	setEndpoints(t, kc.Admin, svc.Name, ready)
	lab.WaitFor(t, 30*time.Second, holder+" rendering the instance without "+rebooted, func() bool {
		return !hasPeer(instanceBlock(kc.KeepalivedConf(t, holder), "default_stale_v4"), kc.ByName[rebooted].Addr)
	})

	kc.API.RestartAPIServer(t, func() {
		if code, out := startPod(t, kc, rebooted, bootstrap); code != 0 {
			t.Fatalf("init container: %d %s", code, out)
		}
		if c := kc.KeepalivedConf(t, rebooted); !strings.Contains(c, vip+"/32") {
			t.Fatalf("%s booted without the Local Service's instance (its last-good view should have it):\n%s", rebooted, c)
		}
		// Many adverts long: a node that hears nobody takes a VIP in
		// three and a bit.
		time.Sleep(10 * kc.Config.Spec.VRRP.Advert())
		if got := kc.Holders(vip); !onePeerHolds(got, rebooted) {
			t.Errorf("%s, booted and held back with the API away, hears no advert of the instance: holders %v, want one of its peers alone (%s held it before)", rebooted, got, holder)
		}
		if b, _ := os.ReadFile(status); string(b) != "-254\n" {
			t.Errorf("%s held back: %s says %q, want -254 (FAULT: no endpoint known before the first sync)", rebooted, status, b)
		}
	})
	// The API is back: its first sync renders it out of the instance.
	lab.WaitFor(t, 30*time.Second, rebooted+" rendering the instance away", func() bool {
		return !strings.Contains(kc.KeepalivedConf(t, rebooted), vip+"/32")
	})
	if got := kc.Holders(vip); !onePeerHolds(got, rebooted) {
		t.Errorf("after %s's first sync: holders %v, want one of its peers alone", rebooted, got)
	}
	p.WantNoFailures(t, vip+" while "+rebooted+" rebooted without its endpoint")
}

// onePeerHolds tells whether exactly one node holds the VIP and it is
// not the rebooted one. Which peer may change while the test runs: the
// first holder is whoever came up first, and a peer of higher priority
// whose sidecar rendered the instance later preempts it, losing nothing.
func onePeerHolds(holders []string, rebooted string) bool {
	return len(holders) == 1 && holders[0] != rebooted
}

// instanceBlock is the vrrp_instance block of keepalived.conf whose name
// ends in suffix, or "".
func instanceBlock(conf, suffix string) string {
	for _, block := range strings.Split(conf, "vrrp_instance ")[1:] {
		name, _, _ := strings.Cut(block, " ")
		if strings.HasSuffix(name, suffix) {
			return block
		}
	}
	return ""
}
