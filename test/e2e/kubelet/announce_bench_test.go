package kubelet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/announcebench"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
)

// The faults BenchmarkAnnounceKubelet injects.
var announceKubeletFaults = []string{"node-loss", "sidecar-crash", "sidecar-down-node-loss"}

// BenchmarkAnnounceKubelet is BenchmarkAnnounce's comparison under a real
// kubelet (the lab of BenchmarkFailoverKubelet: three control-plane nodes
// booted from the rendered MachineConfig, the fast profile, the pool
// IPv4 only), where a crashed sidecar is the real thing: its container
// SIGKILLed through containerd, restarted by the kubelet. One Service
// from the allocator; a client asks its address every 10 ms, one request
// at a time (250 ms timeout); the outage is its longest run of failed
// requests, to the next answer. Faults: node-loss (the holder cut off),
// sidecar-crash (the holder's runtimecfg container killed; until the pod
// is Ready again), sidecar-down-node-loss (the runtimecfg containers of
// both other nodes killed, and the holder cut off at once). The modes
// alternate as in BenchmarkAnnounce; one line per fault and mode:
//
//	announce lab=kubelet profile=fast fault=F mode=M family=ipv4 trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=R
func BenchmarkAnnounceKubelet(b *testing.B) {
	announcebench.PrintUptime()
	results := map[announcebench.Case][]announcebench.Sample{}
	for i := 0; i < *kubeletTrials; i++ {
		for _, fault := range announceKubeletFaults {
			if !failoverbench.Selected(*announcebench.Faults, fault) {
				continue
			}
			for _, mode := range announcebench.ModeOrder(i) {
				c := announcebench.Case{Lab: "kubelet", Mode: mode, Fault: fault, Family: "ipv4"}
				results[c] = append(results[c], announceKubeletTrial(b, mode, fault, i))
			}
		}
	}
	announcebench.Print(results, nil, announceKubeletFaults, v1alpha1.ProfileFast, nil)
	announcebench.PrintUptime()
}

func announceKubeletTrial(b *testing.B, mode, fault string, i int) announcebench.Sample {
	var s announcebench.Sample
	b.Run(fmt.Sprintf("%s-%s-%d", fault, mode, i), func(t *testing.B) {
		kc := startKubeletClusterFrom(t, func(image string) string {
			return strings.Replace(kubeletClusterYAML(image, v1alpha1.ProfileFast),
				"      addresses: ["+kubeletPoolCIDR+"]\n", "      addresses: ["+kubeletPoolCIDR+"]\n      announce: "+mode+"\n", 1)
		})
		kc.waitPodsReady(t, 180*time.Second)
		vip := kc.serviceVIP(t, "web")
		url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(netip.MustParseAddr(vip), kubeletEchoPort))
		lab.WaitFor(t, 30*time.Second, vip+" answering", func() bool { _, err := kc.get(url); return err == nil })
		holders := kc.holders(t, vip)
		if len(holders) != 1 {
			t.Fatalf("%s held by %v, want one node", vip, holders)
		}
		holder := kc.node(holders[0])
		p := kc.poll(url, benchRequestTimeout, true)
		time.Sleep(500 * time.Millisecond)
		moved := func() bool {
			return slices.ContainsFunc(kc.holders(t, vip), func(h string) bool { return h != holder.Name })
		}
		switch fault {
		case "node-loss":
			holder.Host.LinkDown()
			lab.WaitFor(t, 60*time.Second, vip+" on another node", moved)
		case "sidecar-crash":
			restarted := kc.killSidecar(t, holder)
			lab.WaitFor(t, 120*time.Second, holder.Name+"'s sidecar restarted and the pod Ready", restarted)
		case "sidecar-down-node-loss":
			var restarted []func() bool
			for _, n := range kc.nodes {
				if n != holder {
					restarted = append(restarted, kc.killSidecar(t, n))
				}
			}
			holder.Host.LinkDown()
			lab.WaitFor(t, 120*time.Second, vip+" on another node", moved)
			for _, r := range restarted {
				lab.WaitFor(t, 120*time.Second, "the sidecars restarted", r)
			}
		default:
			t.Fatalf("unknown fault %q", fault)
		}
		lab.WaitFor(t, 60*time.Second, vip+" answering", func() bool { _, err := kc.get(url); return err == nil })
		time.Sleep(time.Second)
		p.Stop()
		s.Failed = len(p.failed)
		// The client's own measure: from its first failed request to the
		// next answer. Taking the time before the fault instead counted
		// answers to requests sent while `ip` was still cutting the node
		// off, on a loaded machine tens of milliseconds.
		s.Outage = p.longestGap()
		t.Logf("%s %s: %s on %s, outage %s, %d failed; %s", fault, mode, vip, holder.Name, s.Outage.Round(time.Millisecond), s.Failed, announcebench.LoadAverage())
	})
	return s
}

// killSidecar SIGKILLs n's runtimecfg container through containerd and
// returns a test of whether the kubelet has restarted it and the pod is
// Ready again.
func (kc *kubeletCluster) killSidecar(t testing.TB, n *kubeletlab.Node) func() bool {
	t.Helper()
	p, err := n.Pod(context.Background(), onnode.KeepalivedPodName)
	if err != nil || p == nil {
		t.Fatalf("%s: keepalived pod: %v", n.Name, err)
	}
	id := kubeletlab.ContainerID(p, "runtimecfg")
	if id == "" {
		t.Fatalf("%s: no running runtimecfg container", n.Name)
	}
	if err := n.KillContainer(id); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		p, err := n.Pod(context.Background(), onnode.KeepalivedPodName)
		if err != nil || !kubeletlab.PodReady(p) {
			return false
		}
		nid := kubeletlab.ContainerID(p, "runtimecfg")
		return nid != "" && nid != id
	}
}
