package cluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/test/clusterlab"
	"github.com/vipctl/vipctl/test/lab"
)

// testMigrate: with this release on every node, the live config moves
// from the ConfigMap to the ClusterVIPs object (`vipctl migrate`, which
// installs the CRD) while the API VIP in both families and a Service's
// VIP answer every request; the object's status then names the API VIP's
// holder, lists every pool of the config with the addresses the
// Services' statuses hold in it and the allocator's leader counts in its
// books (its /metrics, scraped as a Prometheus would), and
// follows a planned move (`vipctl drain`) of the API VIP. `--revert`
// hands the live config back to the ConfigMap, again without a failed
// request, as docs/upgrade.md asks before a rollback to the previous
// release.
func testMigrate(t *testing.T, c *clusterlab.Cluster) {
	cfg, err := v1alpha1.Load(c.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.Metadata.Name
	svcAddr := c.ServiceAddrs(t, clusterlab.Services[0].Name, time.Minute)[0]
	poll := func() []*lab.Poller {
		return []*lab.Poller{c.Poll(clusterlab.APIVersionURL(clusterlab.APIVIP4)), c.Poll(clusterlab.APIVersionURL(clusterlab.APIVIP6)),
			c.Poll(clusterlab.URL(svcAddr, clusterlab.ServicePort))}
	}
	wantNoFailures := func(ps []*lab.Poller, what string) {
		t.Helper()
		for i, p := range ps {
			p.WantNoFailures(t, []string{"the API VIP (IPv4)", "the API VIP (IPv6)", "Service VIP " + svcAddr}[i]+" "+what)
		}
	}

	ps := poll()
	time.Sleep(time.Second)
	began := time.Now()
	out, err := c.Vipctl("migrate", "--wait", "2m")
	if err != nil || !strings.Contains(out, "reads the ClusterVIPs object") {
		t.Fatalf("vipctl migrate: %v\n%s", err, out)
	}
	t.Logf("vipctl migrate took %s:\n%s", time.Since(began).Round(time.Millisecond), out)
	time.Sleep(time.Second)
	wantNoFailures(ps, "through vipctl migrate")

	holders := c.Holders(t, clusterlab.APIVIP4)
	if len(holders) != 1 {
		t.Fatalf("API VIP held by %v", holders)
	}
	st := lab.WaitClusterVIPsStatus(t, c.AdminConfig, name, "the API VIP's holder "+holders[0], func(s crd.ClusterVIPsStatus) bool {
		return lab.StatusHolder(s, clusterlab.APIVIP4) == holders[0]
	})
	svcs, err := c.Admin.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) != len(cfg.Spec.ServicePools) {
		t.Errorf("the status counts %d pools, want the config's %d: %+v", len(st.Pools), len(cfg.Spec.ServicePools), st.Pools)
	}
	books := allocatorBooks(t, c, cfg)
	for _, p := range st.Pools {
		if want := addressesIn(cfg, p.Name, svcs.Items); p.InUse != want {
			t.Errorf("pool %s: %d in use in the status, %d in the Services' statuses", p.Name, p.InUse, want)
		}
		if p.InUse != books[p.Name] {
			t.Errorf("pool %s: %d in use in the status, %d in the allocator's books (vipctl_allocator_addresses_in_use)", p.Name, p.InUse, books[p.Name])
		}
	}
	t.Logf("pools in the status: %+v; in the allocator leader's books: %v", st.Pools, books)

	// A planned move shows in the status within a second of the new
	// holder taking the address (issue 52): publishing, the watch, the
	// writer's debounce and its write included. The move's moment is
	// when the address appears on the new holder's interface, polled
	// through the drain (the holder's own since is whole seconds).
	took := watchTakeover(c, clusterlab.APIVIP4, holders[0])
	if out, err := c.Vipctl("drain", holders[0], "--wait"); err != nil {
		t.Fatalf("vipctl drain %s: %v\n%s", holders[0], err, out)
	}
	drained := time.Now()
	next := c.Holders(t, clusterlab.APIVIP4)
	if len(next) != 1 || next[0] == holders[0] {
		t.Fatalf("API VIP held by %v after draining %s", next, holders[0])
	}
	lab.WaitClusterVIPsStatus(t, c.AdminConfig, name, "the API VIP's new holder "+next[0], func(s crd.ClusterVIPsStatus) bool {
		return lab.StatusHolder(s, clusterlab.APIVIP4) == next[0]
	})
	seen := time.Now()
	t.Logf("drain %s -> %s: the status named the new holder %s after vipctl drain --wait returned", holders[0], next[0], seen.Sub(drained).Round(10*time.Millisecond))
	switch node, at, ok := took(); {
	case !ok:
		t.Errorf("the API VIP was never seen on a node but %s while draining it", holders[0])
	case node != next[0]:
		t.Errorf("the API VIP was first seen on %s while draining %s, then held by %s", node, holders[0], next[0])
	case seen.Sub(at) > time.Second:
		t.Errorf("the status named the API VIP's new holder %s %s after the address was on its interface, want within 1s", node, seen.Sub(at).Round(time.Millisecond))
	default:
		t.Logf("the status named the new holder %s after the API VIP was on its interface", seen.Sub(at).Round(time.Millisecond))
	}
	if out, err := c.Vipctl("undrain", holders[0]); err != nil {
		t.Fatalf("vipctl undrain %s: %v\n%s", holders[0], err, out)
	}
	// Undrained, the node preempts: the scenarios after this one start
	// from the holder they would have had.
	if !lab.WaitUntil(30*time.Second, func() bool { return slices.Equal(c.Holders(t, clusterlab.APIVIP4), holders[:1]) }) {
		t.Fatalf("API VIP held by %v 30 s after undraining %s", c.Holders(t, clusterlab.APIVIP4), holders[0])
	}

	ps = poll()
	time.Sleep(time.Second)
	if out, err := c.Vipctl("migrate", "--revert", "--wait", "2m"); err != nil || !strings.Contains(out, "reads the ConfigMap") {
		t.Fatalf("vipctl migrate --revert: %v\n%s", err, out)
	}
	time.Sleep(time.Second)
	wantNoFailures(ps, "through vipctl migrate --revert")
}

// watchTakeover polls, every 20 ms until asked, the control-plane nodes
// but from for addr on their interface; took stops it and says which
// node was seen with it first, and when.
func watchTakeover(c *clusterlab.Cluster, addr, from string) (took func() (node string, at time.Time, ok bool)) {
	type seen struct {
		node string
		at   time.Time
	}
	found := make(chan seen, 1)
	stop := make(chan struct{})
	go func() {
		for {
			for _, n := range c.Masters() {
				if n.Name == from || !n.Running() {
					continue
				}
				if b, err := n.Host.Exec("ip", "-o", "addr", "show", "dev", n.Host.Iface); err == nil && strings.Contains(string(b), " "+addr+"/") {
					found <- seen{n.Name, time.Now()}
					return
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() (string, time.Time, bool) {
		close(stop)
		select {
		case s := <-found:
			return s.node, s.at, true
		case <-time.After(time.Second):
			return "", time.Time{}, false
		}
	}
}

// addressesIn counts the distinct addresses of Services (load-balancer
// and external IPs) that fall in pool's ranges, from their objects: what
// the allocator rebuilds its books from.
func addressesIn(cfg *v1alpha1.ClusterVIPs, pool string, svcs []corev1.Service) int64 {
	var ranges []v1alpha1.AddressRange
	for _, p := range cfg.Spec.ServicePools {
		if p.Name != pool {
			continue
		}
		for _, a := range p.Addresses {
			if r, err := v1alpha1.ParseAddressRange(a); err == nil {
				ranges = append(ranges, r)
			}
		}
	}
	var seen []string
	for _, s := range svcs {
		ips := slices.Clone(s.Spec.ExternalIPs)
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			if err != nil || slices.Contains(seen, a.String()) {
				continue
			}
			if slices.ContainsFunc(ranges, func(r v1alpha1.AddressRange) bool { return r.Contains(a) }) {
				seen = append(seen, a.String())
			}
		}
	}
	return int64(len(seen))
}
