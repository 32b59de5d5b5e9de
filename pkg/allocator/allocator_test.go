package allocator

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

func pools() []v1alpha1.ServicePool {
	no := false
	return []v1alpha1.ServicePool{
		{Name: "web", Addresses: []string{"198.51.100.128-198.51.100.133", "2001:db8:100::10-2001:db8:100::14"}, Instances: 2},
		{Name: "dmz", Addresses: []string{"203.0.113.64/29"}, Instances: 1, Namespaces: []string{"dmz"}},
		{Name: "manual", Addresses: []string{"203.0.113.200-203.0.113.210"}, Instances: 1, AutoAssign: &no},
		{Name: "labelled", Addresses: []string{"203.0.113.100-203.0.113.110"}, Instances: 1, ServiceSelector: map[string]string{"tier": "gold"}},
	}
}

func req(key string, mod ...func(*Request)) Request {
	r := Request{Key: key, Namespace: "default", Families: []Family{IPv4}, Required: true, Ports: []Port{{"TCP", 80}}}
	for _, m := range mod {
		m(&r)
	}
	return r
}

func TestAllocate(t *testing.T) {
	a := New(pools())
	step := func(r Request, want string, wantReason Reason) {
		t.Helper()
		got, err := a.Allocate(r)
		if ReasonOf(err) != wantReason {
			t.Fatalf("%s: err %v, want reason %q", r.Key, err, wantReason)
		}
		if err == nil && fmt.Sprint(got) != want {
			t.Fatalf("%s: got %v, want %s", r.Key, got, want)
		}
	}
	// First pool, lowest address; the anchors (.133, .132) are never given.
	step(req("default/a"), "[198.51.100.128]", "")
	step(req("default/a"), "[198.51.100.128]", "") // idempotent
	step(req("default/b"), "[198.51.100.129]", "")
	step(req("default/c"), "[198.51.100.130]", "")
	step(req("default/d"), "[198.51.100.131]", "")
	// web's IPv4 is used up; the other pools do not admit a plain
	// Service (namespace, autoAssign off, label).
	step(req("default/e"), "", ReasonExhausted)
	// A gold Service falls through to labelled.
	step(req("default/f", func(r *Request) { r.Labels = map[string]string{"tier": "gold"} }), "[203.0.113.100]", "")
}

// Backend keys as BackendKey makes them from a Service.
var clusterPolicy = BackendKey(&corev1.Service{})

func local(selector string) string {
	sel, _ := labels.ConvertSelectorToLabelsMap(selector)
	return BackendKey(&corev1.Service{Spec: corev1.ServiceSpec{ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Selector: sel}})
}

func manual(ns, name string) string {
	return BackendKey(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal}})
}

func TestAllocateRules(t *testing.T) {
	gold := func(r *Request) { r.Labels = map[string]string{"tier": "gold"} }
	dual := func(r *Request) { r.Families = []Family{IPv4, IPv6} }
	prefer := func(r *Request) { r.Families = []Family{IPv6, IPv4}; r.Required = false }
	want := func(s ...string) func(*Request) { return func(r *Request) { r.Requested = fixture.Addrs(s...) } }
	pool := func(p string) func(*Request) { return func(r *Request) { r.Pool = p } }
	ns := func(n string) func(*Request) { return func(r *Request) { r.Namespace = n } }
	share := func(k string, port int32) func(*Request) {
		return func(r *Request) { r.SharingKey = k; r.Ports = []Port{{"TCP", port}} }
	}
	backend := func(k string) func(*Request) { return func(r *Request) { r.Backend = k } }
	cases := []struct {
		name   string
		before []Request
		r      Request
		want   string
		reason Reason
	}{
		{name: "selector admits", r: req("default/g", gold, pool("labelled")), want: "[203.0.113.100]"},
		{name: "selector refuses", r: req("default/g", pool("labelled")), reason: ReasonNotAllowed},
		{name: "namespace refuses", r: req("default/x", pool("dmz")), reason: ReasonNotAllowed},
		{name: "namespace admits", r: req("dmz/x", ns("dmz"), pool("dmz")), want: "[203.0.113.64]"},
		{name: "unknown pool", r: req("default/x", pool("nope")), reason: ReasonNoPool},
		{name: "autoAssign off needs a request", r: req("default/x", want("203.0.113.205")), want: "[203.0.113.205]"},
		{name: "requested outside every pool", r: req("default/x", want("198.51.100.50")), reason: ReasonNotInPool},
		{name: "requested anchor", r: req("default/x", want("198.51.100.133")), reason: ReasonAnchor},
		{name: "requested in a pool that does not admit", r: req("default/x", want("203.0.113.65")), reason: ReasonNotAllowed},
		{name: "requested in use", before: []Request{req("default/y", want("198.51.100.130"))}, r: req("default/x", want("198.51.100.130")), reason: ReasonInUse},
		{name: "dual-stack", r: req("default/x", dual), want: "[198.51.100.128 2001:db8:100::10]"},
		{name: "require dual-stack without IPv6", r: req("dmz/x", ns("dmz"), pool("dmz"), dual), reason: ReasonFamily},
		{name: "prefer dual-stack without IPv6", r: req("dmz/x", ns("dmz"), pool("dmz"), prefer), want: "[203.0.113.64]"},
		{name: "prefer dual-stack, IPv6 first", r: req("default/x", prefer), want: "[2001:db8:100::10 198.51.100.128]"},
		{name: "two requested of one family", r: req("default/x", want("198.51.100.128", "198.51.100.129")), reason: ReasonBadRequest},
		{name: "shared, ports differ", before: []Request{req("default/y", share("k", 80))}, r: req("default/x", share("k", 443)), want: "[198.51.100.128]"},
		{name: "shared, ports clash", before: []Request{req("default/y", share("k", 80), want("198.51.100.128"))}, r: req("default/x", share("k", 80), want("198.51.100.128")), reason: ReasonInUse},
		{name: "shared key differs", before: []Request{req("default/y", share("k", 80), want("198.51.100.128"))}, r: req("default/x", share("other", 443), want("198.51.100.128")), reason: ReasonInUse},
		// allow-shared-ip is free text: a Service elsewhere that knows or
		// guesses the key must not join the address.
		{name: "shared key from another namespace, requested", before: []Request{req("victim/y", ns("victim"), share("k", 80), want("198.51.100.128"))}, r: req("default/x", share("k", 443), want("198.51.100.128")), reason: ReasonInUse},
		{name: "shared key from another namespace gets its own address", before: []Request{req("victim/y", ns("victim"), share("k", 80))}, r: req("default/x", share("k", 443)), want: "[198.51.100.129]"},
		{name: "no sharing without a key", before: []Request{req("default/y")}, r: req("default/x"), want: "[198.51.100.129]"},
		// The backend rule (BackendKey): all Cluster, or all Local with
		// one selector.
		{name: "shared, both Local, same selector", before: []Request{req("default/y", share("k", 80), backend(local("app=web")))}, r: req("default/x", share("k", 443), backend(local("app=web"))), want: "[198.51.100.128]"},
		{name: "shared, Local beside Cluster, requested", before: []Request{req("default/y", share("k", 80), backend(clusterPolicy), want("198.51.100.128"))}, r: req("default/x", share("k", 443), backend(local("app=web")), want("198.51.100.128")), reason: ReasonInUse},
		{name: "shared, Cluster beside Local gets its own address", before: []Request{req("default/y", share("k", 80), backend(local("app=web")))}, r: req("default/x", share("k", 443), backend(clusterPolicy)), want: "[198.51.100.129]"},
		{name: "shared, Local with another selector gets its own address", before: []Request{req("default/y", share("k", 80), backend(local("app=web")))}, r: req("default/x", share("k", 443), backend(local("app=db"))), want: "[198.51.100.129]"},
		{name: "shared, Local without a selector shares with nobody", before: []Request{req("default/y", share("k", 80), backend(manual("default", "y")))}, r: req("default/x", share("k", 443), backend(manual("default", "x"))), want: "[198.51.100.129]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New(pools())
			for _, b := range tc.before {
				if _, err := a.Allocate(b); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.Allocate(tc.r)
			if ReasonOf(err) != tc.reason {
				t.Fatalf("err %v, want reason %q", err, tc.reason)
			}
			if err == nil && fmt.Sprint(got) != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
			if err != nil && len(a.Addresses(tc.r.Key)) != 0 {
				t.Fatalf("a failed allocation recorded %v", a.Addresses(tc.r.Key))
			}
		})
	}
}

func TestExhaustionAndRelease(t *testing.T) {
	a := New([]v1alpha1.ServicePool{{Name: "tiny", Addresses: []string{"198.51.100.128-198.51.100.130"}, Instances: 1}})
	if _, err := a.Allocate(req("default/a")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(req("default/b")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(req("default/c")); ReasonOf(err) != ReasonExhausted {
		t.Fatalf("third Service in a pool of two: %v, want %s", err, ReasonExhausted)
	}
	a.Release("default/a")
	if got, err := a.Allocate(req("default/c")); err != nil || got[0] != netip.MustParseAddr("198.51.100.128") {
		t.Fatalf("after a release: %v %v, want the released address", got, err)
	}
}

func TestAssignRebuildAndOrphans(t *testing.T) {
	a := New(pools())
	if err := a.Assign(req("default/a"), fixture.Addrs("198.51.100.130")); err != nil {
		t.Fatal(err)
	}
	if err := a.Assign(req("default/b"), fixture.Addrs("198.51.100.130")); ReasonOf(err) != ReasonInUse {
		t.Fatalf("rebuilding a duplicate: %v, want %s", err, ReasonInUse)
	}
	// A fresh Service never gets a rebuilt address.
	got, _ := a.Allocate(req("default/c"))
	got2, _ := a.Allocate(req("default/d"))
	got3, _ := a.Allocate(req("default/e"))
	if slices.Contains(append(append(got, got2...), got3...), netip.MustParseAddr("198.51.100.130")) {
		t.Fatalf("handed out an address recorded at rebuild")
	}
	// The pools shrink: the holder keeps its address, reported as orphan.
	a.SetPools(pools()[1:])
	if o := a.Orphans(); len(o["default/a"]) != 1 {
		t.Fatalf("orphans %v, want default/a's address", o)
	}
}

// TestNeverTwice: random creates, deletes, shares and pool edits never
// put one address on two Services that may not share it.
func TestNeverTwice(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		neverTwice(t, seed)
	}
}

func neverTwice(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	a := New(pools())
	live := map[string]Request{}
	for step := 0; step < 20000; step++ {
		key := fmt.Sprintf("ns%d/s%d", rng.IntN(2), rng.IntN(60))
		switch op := rng.IntN(10); {
		case op < 6:
			r := req(key)
			r.Namespace = key[:3]
			if rng.IntN(3) == 0 {
				r.SharingKey = fmt.Sprintf("k%d", rng.IntN(2))
				r.Ports = []Port{{"TCP", int32(80 + rng.IntN(3))}}
			}
			if rng.IntN(4) == 0 {
				r.Families = []Family{IPv4, IPv6}
				r.Required = rng.IntN(2) == 0
			}
			if rng.IntN(5) == 0 {
				r.Requested = fixture.Addrs(fmt.Sprintf("198.51.100.%d", 128+rng.IntN(8)))
			}
			if _, err := a.Allocate(r); err == nil {
				live[key] = r
			}
		case op < 9:
			a.Release(key)
			delete(live, key)
		default:
			a.SetPools(pools()[:1+rng.IntN(4)])
		}
		checkNoConflict(t, a, live)
	}
}

func checkNoConflict(t *testing.T, a *Allocator, live map[string]Request) {
	t.Helper()
	users := map[netip.Addr][]string{}
	for key := range live {
		for _, ad := range a.Addresses(key) {
			users[ad] = append(users[ad], key)
		}
	}
	for ad, keys := range users {
		if len(keys) < 2 {
			continue
		}
		first := live[keys[0]]
		ports := map[Port]bool{}
		for _, k := range keys {
			r := live[k]
			if r.SharingKey == "" || r.SharingKey != first.SharingKey {
				t.Fatalf("%s held by %v without a common sharing key", ad, keys)
			}
			if r.Namespace != first.Namespace {
				t.Fatalf("%s shared by %v across namespaces", ad, keys)
			}
			for _, p := range r.Ports {
				if ports[p] {
					t.Fatalf("%s shared by %v with a clashing port %v", ad, keys, p)
				}
				ports[p] = true
			}
		}
	}
}

// TestShareAcrossNamespacesWhenAllowed: a pool that says so lets Services
// of different namespaces share an address under one key.
func TestShareAcrossNamespacesWhenAllowed(t *testing.T) {
	a := New([]v1alpha1.ServicePool{{Name: "shared", Addresses: []string{"198.51.100.128-198.51.100.133"}, Instances: 1, ShareAcrossNamespaces: true}})
	first := req("team-a/web", func(r *Request) { r.Namespace = "team-a"; r.SharingKey = "k" })
	second := req("team-b/web", func(r *Request) { r.Namespace = "team-b"; r.SharingKey = "k"; r.Ports = []Port{{"TCP", 443}} })
	got1, err := a.Allocate(first)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := a.Allocate(second)
	if err != nil || fmt.Sprint(got1) != fmt.Sprint(got2) {
		t.Fatalf("second namespace got %v, %v; want to share %v", got2, err, got1)
	}
}

// TestMaxPerNamespace: one namespace cannot take more than its share of a
// pool; other namespaces still get addresses and the ones it holds stay.
func TestMaxPerNamespace(t *testing.T) {
	a := New([]v1alpha1.ServicePool{{Name: "p", Addresses: []string{"198.51.100.128-198.51.100.140"}, Instances: 1, MaxPerNamespace: 2}})
	in := func(ns, name string) Request {
		return req(ns+"/"+name, func(r *Request) { r.Namespace = ns })
	}
	for _, r := range []Request{in("greedy", "a"), in("greedy", "b"), in("greedy", "a")} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
	}
	_, err := a.Allocate(in("greedy", "c"))
	if ReasonOf(err) != ReasonNSLimit {
		t.Fatalf("third Service of one namespace: %v, want %s", err, ReasonNSLimit)
	}
	if want := "namespace greedy already has as many Services as it may in pool(s) p (maxPerNamespace 2)"; err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	if _, err := a.Allocate(in("other", "a")); err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	a.Release("greedy/a")
	if _, err := a.Allocate(in("greedy", "c")); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// TestReservedNeverGiven: a pool that still holds its network's reserved
// addresses (written before validate refused it) never hands them out, a
// request for one is refused with its reason, and a Service that holds
// one gets another address.
func TestReservedNeverGiven(t *testing.T) {
	c := &v1alpha1.ClusterVIPs{Spec: v1alpha1.ClusterVIPsSpec{MachineNetworks: []string{"198.51.100.0/24"}}}
	a := New([]v1alpha1.ServicePool{{Name: "low", Addresses: []string{"198.51.100.0-198.51.100.5"}, Instances: 1}})
	a.SetReserved(c.ReservedAddresses(nil))
	if got, err := a.Allocate(req("default/a")); err != nil || got[0] != netip.MustParseAddr("198.51.100.1") {
		t.Fatalf("got %v, %v; want 198.51.100.1, never the network address", got, err)
	}
	_, err := a.Allocate(req("default/b", func(r *Request) { r.Requested = fixture.Addrs("198.51.100.0") }))
	if ReasonOf(err) != ReasonReserved || err.Error() != "requested 198.51.100.0 is the network address of machine network 198.51.100.0/24 and is never given to a Service" {
		t.Fatalf("requesting the network address: %v", err)
	}
	old := req("default/old")
	if err := a.Assign(old, fixture.Addrs("198.51.100.0")); err != nil {
		t.Fatal(err)
	}
	if got := a.HoldingReserved(); !slices.Equal(got, []string{"default/old"}) {
		t.Errorf("holding a reserved address: %v, want default/old", got)
	}
	if got, err := a.Allocate(old); err != nil || got[0] == netip.MustParseAddr("198.51.100.0") {
		t.Fatalf("a Service holding the network address keeps it: %v, %v", got, err)
	}
	// A node's own address reserved later: its holder is named, the
	// others not.
	a.SetReserved(c.ReservedAddresses([]v1alpha1.NodeAddresses{{Name: "worker-7", Addresses: fixture.Addrs("198.51.100.1")}}))
	if got := a.HoldingReserved(); !slices.Equal(got, []string{"default/a"}) {
		t.Errorf("holding a reserved address once 198.51.100.1 is worker-7's: %v, want default/a", got)
	}
}

// TestNamespaceServicesMetric: the namespace_services series count what
// maxPerNamespace is checked against (Services, not addresses: a dual-stack
// Service is one), only for pools with a cap, and a namespace that
// releases its last address loses its series rather than keeping its last
// count; pool_max_per_namespace is the cap of those pools.
func TestNamespaceServicesMetric(t *testing.T) {
	pools := []v1alpha1.ServicePool{
		{Name: "capped", Addresses: []string{"198.51.100.128-198.51.100.140", "2001:db8:100::10-2001:db8:100::14"}, Instances: 1, MaxPerNamespace: 3},
		{Name: "open", Addresses: []string{"203.0.113.64/29"}, Instances: 1},
	}
	a := New(pools)
	in := func(ns, name, pool string, fams ...Family) Request {
		return req(ns+"/"+name, func(r *Request) { r.Namespace, r.Pool, r.Families = ns, pool, fams })
	}
	for _, r := range []Request{
		in("shop", "a", "capped", IPv4, IPv6), in("shop", "b", "capped", IPv4),
		in("blog", "a", "capped", IPv4), in("blog", "b", "open", IPv4),
	} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
	}
	m := NewMetrics(nil)
	m.setPools(pools)
	m.setNamespaceServices(a.NamespaceUsers())
	got := func(pool, ns string) float64 {
		return testutil.ToFloat64(m.NamespaceServices.WithLabelValues(pool, ns))
	}
	if n := got("capped", "shop"); n != 2 {
		t.Errorf("capped/shop: %v, want 2 (a dual-stack Service counts once)", n)
	}
	if n := got("capped", "blog"); n != 1 {
		t.Errorf("capped/blog: %v, want 1", n)
	}
	if n := testutil.CollectAndCount(m.NamespaceServices); n != 2 {
		t.Errorf("%d namespace_services series, want 2 (none for the pool without a cap)", n)
	}
	if n := testutil.CollectAndCount(m.MaxPerNamespace); n != 1 {
		t.Errorf("%d pool_max_per_namespace series, want 1 (none for the pool without a cap)", n)
	}
	if n := testutil.ToFloat64(m.MaxPerNamespace.WithLabelValues("capped")); n != 3 {
		t.Errorf("pool_max_per_namespace capped: %v, want 3", n)
	}

	a.Release("blog/a")
	m.setNamespaceServices(a.NamespaceUsers())
	if n := testutil.CollectAndCount(m.NamespaceServices); n != 1 {
		t.Errorf("after blog released its address: %d series, want only capped/shop", n)
	}
}

// TestMetricsSeriesFromTheStart: the counters alerts take increase() of
// have their series at 0 before the first failure (a series created by
// its first increment hides that increment from increase()).
func TestMetricsSeriesFromTheStart(t *testing.T) {
	t.Parallel()
	m := NewMetrics(nil)
	if n := testutil.CollectAndCount(m.Failures); n != len(reasons) {
		t.Errorf("%d failures_total series, want one per reason (%d)", n, len(reasons))
	}
	if v := testutil.ToFloat64(m.Failures.WithLabelValues(string(ReasonNSLimit))); v != 0 {
		t.Errorf("failures_total{reason=NamespaceLimit} %v, want 0", v)
	}
	if n := testutil.CollectAndCount(m.WatchErrors); n != len(watchedResources) {
		t.Errorf("%d watch_errors_total series, want %d", n, len(watchedResources))
	}
}

// TestIncompatibleShareKept: an address two Services already share (in
// their status, from a vipctl without the backend rule) is recorded and
// kept by both, and Incompatible names the other Service for each, so
// the controller warns; a third Service of another policy is refused it.
func TestIncompatibleShareKept(t *testing.T) {
	a := New(pools())
	ad := fixture.Addrs("198.51.100.128")
	web := req("default/web", func(r *Request) { r.SharingKey = "k"; r.Ports = []Port{{"TCP", 80}}; r.Backend = clusterPolicy })
	db := req("default/db", func(r *Request) { r.SharingKey = "k"; r.Ports = []Port{{"TCP", 5432}}; r.Backend = local("app=db") })
	for _, r := range []Request{web, db} {
		if err := a.Assign(r, ad); err != nil {
			t.Fatalf("%s: a share in the status refused: %v", r.Key, err)
		}
	}
	for _, r := range []Request{web, db} {
		got, err := a.Allocate(r)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(ad) {
			t.Fatalf("%s: got %v, %v; want to keep %v", r.Key, got, err, ad)
		}
	}
	if got := fmt.Sprint(a.Incompatible("default/web")); got != "map[198.51.100.128:[default/db]]" {
		t.Errorf("Incompatible(web) = %s", got)
	}
	if got := fmt.Sprint(a.Incompatible("default/db")); got != "map[198.51.100.128:[default/web]]" {
		t.Errorf("Incompatible(db) = %s", got)
	}
	third := req("default/cache", func(r *Request) {
		r.SharingKey = "k"
		r.Ports = []Port{{"TCP", 6379}}
		r.Backend = local("app=cache")
		r.Requested = ad
	})
	_, err := a.Allocate(third)
	if ReasonOf(err) != ReasonInUse || !strings.Contains(err.Error(), "externalTrafficPolicy Local with selector \"app=cache\"") {
		t.Errorf("a new incompatible share: %v", err)
	}
}
