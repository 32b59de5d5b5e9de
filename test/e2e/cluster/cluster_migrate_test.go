package cluster

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

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
	// holder's claim on its Node (issue 52: the watch, the writer's
	// debounce and its write); the way from the address appearing on the
	// new holder's interface (polled through the drain: the holder's own
	// since is whole seconds) to its claim is logged.
	took := watchTakeover(c, name, clusterlab.APIVIP4, holders[0])
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
	tk, ok := took()
	if !tk.named.IsZero() {
		seen = tk.named
	}
	switch {
	case !ok:
		t.Errorf("the API VIP was never seen on a node but %s while draining it", holders[0])
	case tk.node != next[0]:
		t.Errorf("the API VIP was first seen on %s while draining %s, then held by %s", tk.node, holders[0], next[0])
	case tk.posted.IsZero():
		t.Logf("the status named the new holder %s after the API VIP was on its interface (its claim on its Node not seen by the watch)", seen.Sub(tk.onInterface).Round(time.Millisecond))
	default:
		// The writer's part (watch, debounce, write) is held to a
		// second; the whole way from the interface is logged: the new
		// holder's claim takes 0.8 s of it (docs/api.md, "Status").
		total, posted, named := seen.Sub(tk.onInterface), tk.posted.Sub(tk.onInterface), seen.Sub(tk.posted)
		if named > time.Second {
			t.Errorf("the status named the API VIP's new holder %s %s after its claim was on its Node, want within 1s", tk.node, named.Round(time.Millisecond))
		}
		t.Logf("the status named the new holder %s after the API VIP was on its interface: its claim on its Node after %s, the status %s later",
			total.Round(time.Millisecond), posted.Round(time.Millisecond), named.Round(time.Millisecond))
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

// takeover is what watchTakeover saw: the node that took the address,
// when it was on its interface, and when that node's vipctl.io/vips
// annotation first named it (zero: not within the watch).
type takeover struct {
	node                       string
	onInterface, posted, named time.Time
}

// watchTakeover polls, every 20 ms until asked, the control-plane nodes
// but from for addr on their interface, then the taker's Node for its
// claim, then the status of ClusterVIPs object name for the taker named
// as addr's holder: when the status changed, not when a test that waited
// for something else first looked; took stops it and says what it saw
// (ok false: no node took it).
func watchTakeover(c *clusterlab.Cluster, name, addr, from string) (took func() (takeover, bool)) {
	objects := dynamic.NewForConfigOrDie(c.AdminConfig).Resource(crd.Resource)
	found := make(chan takeover, 1)
	stop := make(chan struct{})
	go func() {
		var seen takeover
		defer func() { found <- seen }()
		for {
			if seen.node == "" {
				for _, n := range c.Masters() {
					if n.Name == from || !n.Running() {
						continue
					}
					if b, err := n.Host.Exec("ip", "-o", "addr", "show", "dev", n.Host.Iface); err == nil && strings.Contains(string(b), " "+addr+"/") {
						seen = takeover{node: n.Name, onInterface: time.Now()}
						break
					}
				}
			} else if seen.posted.IsZero() {
				if n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), seen.node, metav1.GetOptions{}); err == nil &&
					strings.Contains(n.Annotations[v1alpha1.AnnotationNodeVIPs], addr) {
					seen.posted = time.Now()
				}
			} else if u, err := objects.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				if obj, err := crd.FromUnstructured(u); err == nil && lab.StatusHolder(obj.Status, addr) == seen.node {
					seen.named = time.Now()
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
	return func() (takeover, bool) {
		close(stop)
		select {
		case s := <-found:
			return s, s.node != ""
		case <-time.After(5 * time.Second):
			return takeover{}, false
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
