package cluster

import (
	"flag"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/clusterlab"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
)

var clusterTrials = flag.Int("cluster-trials", 3, "failover benchmark in the cluster lab: trials per profile and scenario (one cluster per profile, about 2 minutes to start, then 1-2 minutes a trial)")

// BenchmarkFailoverCluster is BenchmarkFailover in the cluster lab: a
// client asks the vrrp pool's Cluster-policy Service address (IPv4),
// answered by the echo pods behind kube-proxy, every 10 ms with a 250 ms
// timeout, the process lab's client. node-loss: the address's holder
// drops off its switch port; planned: the holder's keepalived manifest
// removed (the kubelet runs the preStop drain). The outage runs from the
// fault to the first answer after the first failed request (zero when
// none failed). One cluster per profile
// serves every trial: the node comes back (or its manifest) and the
// cluster settles before the next. One line per profile and scenario:
//
//	failover lab=cluster profile=<p> advert=<a> scenario=<s> trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=F
//
// `make bench-failover` runs it with the other labs' benchmarks.
func BenchmarkFailoverCluster(b *testing.B) {
	clusterlab.Require(b)
	for _, profile := range []string{v1alpha1.ProfileDefault, v1alpha1.ProfileFast} {
		if !failoverbench.Selected(*failoverbench.Profiles, profile) {
			continue
		}
		b.Run(profile, func(b *testing.B) {
			c := clusterlab.Start(b, clusterlab.Options{Profile: profile})
			for _, scenario := range []string{"node-loss", "planned"} {
				if !failoverbench.Selected(*failoverbench.Scenarios, scenario) {
					continue
				}
				var outages []time.Duration
				failed := 0
				for i := range *clusterTrials {
					b.Run(fmt.Sprintf("%s/trial-%d", scenario, i), func(b *testing.B) {
						d, f := clusterFailoverTrial(b, c, scenario)
						outages = append(outages, d)
						failed += f
					})
				}
				if len(outages) > 0 {
					failoverbench.Print("failover lab=cluster", profile, clusterAdvert(profile), scenario, outages, failed)
				}
			}
		})
	}
}

// clusterAdvert is the advert interval of the cluster lab's profile.
func clusterAdvert(profile string) string {
	return failoverbench.AdvertOf(clusterlab.ClusterYAML("example.test/vipctl:lab", profile, false))
}

// clusterFailoverTrial injects one fault into the holder of the vrrp
// pool's Cluster Service address and returns the outage and the failed
// requests, then puts the node back and waits for the cluster to settle.
func clusterFailoverTrial(b *testing.B, c *clusterlab.Cluster, scenario string) (time.Duration, int) {
	name := clusterService(clusterlab.PoolVRRP, corev1.ServiceExternalTrafficPolicyCluster)
	addr := c.ServiceAddrs(b, name, time.Minute)[0]
	// The fast profile's 100 ms adverts come late now and then on two
	// cores shared with the control plane, and a peer takes the address
	// for a moment: wait for one holder.
	var holders []string
	lab.WaitFor(b, 30*time.Second, addr+" held by one node", func() bool {
		holders = c.Holders(b, addr)
		return len(holders) == 1
	})
	n := c.Node(holders[0])
	// Any node's kube-proxy answers for the address, so a client whose
	// neighbour entry still names an earlier holder (a returned node
	// that preempted it sends no gratuitous ARP) loses nothing when the
	// holder is lost: forget it, so the client asks the holder.
	if _, err := c.Client.Exec("ip", "neigh", "flush", "to", addr); err != nil {
		b.Fatal(err)
	}
	p := lab.StartPolling(c.Client, clusterlab.URL(addr, clusterlab.ServicePort), 10*time.Millisecond, lab.PollTimeout, true)
	defer p.Stop()
	time.Sleep(500 * time.Millisecond)
	fault := time.Now()
	var manifest []byte
	switch scenario {
	case "node-loss":
		n.Lose()
	case "planned":
		var err error
		if manifest, err = n.ReadFile(clusterlab.ManifestPath(onnode.KeepalivedPodName)); err != nil {
			b.Fatal(err)
		}
		if err := n.RemoveFile(clusterlab.ManifestPath(onnode.KeepalivedPodName)); err != nil {
			b.Fatal(err)
		}
	}
	// A node cut off still carries the address (it cannot tell): wait
	// for another node to have it.
	lab.WaitFor(b, time.Minute, addr+" on another node than "+n.Name, func() bool {
		for _, h := range c.Holders(b, addr) {
			if h != n.Name {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	outage := p.Recovery(b, fault, time.Minute)
	_, failed := p.Stop()
	b.Logf("%s: %s from %s, outage %s, %d failed requests", scenario, addr, n.Name, outage.Round(time.Millisecond), failed)
	switch scenario {
	case "node-loss":
		n.Return()
	case "planned":
		if err := n.WriteFile(clusterlab.ManifestPath(onnode.KeepalivedPodName), 0o644, manifest); err != nil {
			b.Fatal(err)
		}
	}
	c.Settle(b, 5*time.Minute)
	return outage, failed
}
