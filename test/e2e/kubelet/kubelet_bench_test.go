package kubelet

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
)

var kubeletTrials = flag.Int("kubelet-trials", 3, "failover benchmark in the kubelet lab: trials per profile and scenario (each boots three nodes, about a minute)")

// BenchmarkFailoverKubelet is BenchmarkFailover in the kubelet lab: the
// static pods under a real kubelet, a client asking the API VIP through
// haproxy every 10 ms (250 ms timeout). node-loss: from the holder's link
// cut to the first answer; planned: the keepalived manifest removed on the
// holder (the kubelet runs the preStop drain), the longest run of failed
// requests. One line per profile and scenario:
//
//	failover lab=kubelet profile=<p> scenario=<s> trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=F
//
// `make bench-failover` runs it with the process lab's benchmark.
func BenchmarkFailoverKubelet(b *testing.B) {
	failoverbench.Cases(b, "kubelet", []string{"node-loss", "planned"}, *kubeletTrials, kubeletAdvert, kubeletFailoverTrial)
}

// kubeletAdvert is the advert interval of the kubelet lab's profile.
func kubeletAdvert(profile string) string {
	return failoverbench.AdvertOf(kubeletClusterYAML("example.test/vipctl:lab", profile))
}

func kubeletFailoverTrial(b *testing.B, profile, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		kc := startKubeletCluster(t, profile)
		n := kc.node(kc.serving(t))
		p := kc.poll(apiVIPURL(), benchRequestTimeout, true)
		time.Sleep(500 * time.Millisecond)
		fault := time.Now()
		switch scenario {
		case "node-loss":
			n.Host.LinkDown()
		case "planned":
			if err := n.RemoveFile(onnode.StaticPodDir + "/" + onnode.KeepalivedPodName + ".yaml"); err != nil {
				t.Fatal(err)
			}
		}
		// A node cut off still carries the VIP (it cannot tell), so wait
		// for another node to have it, not for one holder.
		lab.WaitFor(t, 60*time.Second, "API VIP on another node", func() bool {
			for _, h := range kc.holders(t, kubeletAPIVIP) {
				if h != n.Name {
					return true
				}
			}
			return false
		})
		time.Sleep(2 * time.Second)
		p.Stop()
		failed = len(p.failed)
		if scenario == "planned" {
			outage = p.longestGap()
			return
		}
		first, ok := p.firstOKAfter(fault)
		if !ok {
			t.Fatal("no answer after the fault")
		}
		outage = first.Sub(fault)
	})
	return outage, failed
}
