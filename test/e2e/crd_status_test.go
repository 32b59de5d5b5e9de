package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/pkg/statuswriter"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
)

// statusYAML is the lab's cluster with an ingress VIP and allocPools.
var statusYAML = labYAML("  api: {vips: ["+apiVIP+"]}\n  ingress: [{name: default, vips: [198.51.100.6]}]\n", "fast", "unicast", allocPools)

// TestCRDStatusWriter: against the real apiserver, the allocator's
// leader keeps the ClusterVIPs object's status true to what the nodes
// publish and the Services hold: each VIP's holder and since when, a
// move within the debounce, a split brain and a VIP nobody holds as
// Degraded, pool usage equal to the allocator's books, each node's
// generation from the digest it publishes, a spec edit that leaves the
// nodes behind, and `oc get` showing the holder and pool usage.
func TestCRDStatusWriter(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	e := startAllocEnv(t, statusYAML)
	admin := e.api.AdminConfig()
	lab.CreateClusterVIPs(t, admin, statusYAML)
	ctx := context.Background()
	cfg, err := v1alpha1.Parse([]byte(statusYAML))
	if err != nil {
		t.Fatal(err)
	}
	digest := v1alpha1.SpecDigest(cfg.Metadata.Name, cfg.Spec)
	for _, n := range []string{"master-0", "master-1", "worker-0"} {
		if _, err := e.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	publish := func(node string, at time.Time, vips ...string) {
		t.Helper()
		held := v1alpha1.HeldVIPs{}
		for _, v := range vips {
			key := v1alpha1.KeyAPI
			if v == "198.51.100.6" {
				key = v1alpha1.IngressKey("default")
			}
			held = append(held, v1alpha1.HeldVIP{Address: v, Instance: key, Since: at})
		}
		annotateNode(t, e, node, v1alpha1.AnnotationNodeVIPs, held.String())
	}
	publish("master-0", since, apiVIP, "198.51.100.6")
	publish("master-1", since)
	// worker-0 runs no sidecar: it publishes nothing and is no node of
	// the status.

	a := lab.StartAllocator(t, e.api, e.token, "a-0")
	e.service(t, "default", "web-1")
	e.waitIPs(t, "default", "web-1", 1)

	st := waitStatus(t, admin, "the holders, the pool in use, the nodes behind", func(s crd.ClusterVIPsStatus) bool {
		return lab.StatusHolder(s, apiVIP) == "master-0" && lab.StatusHolder(s, "198.51.100.6") == "master-0" &&
			len(s.Pools) == 2 && s.Pools[0].InUse == 1 && len(s.Nodes) == 2
	})
	if v := lab.VIPStatus(st, apiVIP); v.Instance != "api" || v.State != "ok" || v.Since == nil || !v.Since.Time.Equal(since) {
		t.Errorf("API VIP: %+v, want instance api, state ok, since %s", v, since)
	}
	// web: a /26 and 256 IPv6 addresses, two instances' anchors per
	// family, one address in use; small: four addresses, one anchor.
	if want := []crd.PoolStatus{{Name: "web", InUse: 1, Free: 64 + 256 - 4 - 1}, {Name: "small", InUse: 0, Free: 3}}; !slices.Equal(st.Pools, want) {
		t.Errorf("pools: %+v, want %+v", st.Pools, want)
	}
	if books := testutil.ToFloat64(a.Metrics.InUse.WithLabelValues("web")); books != float64(st.Pools[0].InUse) {
		t.Errorf("pool web: %d in use in the status, %v in the allocator's books", st.Pools[0].InUse, books)
	}
	wantCondition(t, st, crd.ConditionReady, metav1.ConditionFalse, statuswriter.ReasonNodesBehind, "master-0, master-1")
	wantCondition(t, st, crd.ConditionDegraded, metav1.ConditionFalse, statuswriter.ReasonAsExpected, "")
	if st.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d, want 1", st.ObservedGeneration)
	}

	// Both nodes say they run the object's spec: Ready.
	for _, n := range []string{"master-0", "master-1"} {
		annotateNode(t, e, n, v1alpha1.AnnotationNodeConfig, digest)
	}
	st = waitStatus(t, admin, "every node on generation 1", func(s crd.ClusterVIPsStatus) bool {
		return len(s.Nodes) == 2 && s.Nodes[0].ObservedGeneration == 1 && s.Nodes[1].ObservedGeneration == 1
	})
	wantCondition(t, st, crd.ConditionReady, metav1.ConditionTrue, statuswriter.ReasonAllHeld, "2 VIP(s)")

	// The API VIP moves: the status follows within the debounce and the
	// apiserver's round trips (measured, not asserted: docs/benchmarks.md).
	moved := since.Add(time.Minute)
	start := time.Now()
	publish("master-0", since, "198.51.100.6")
	publish("master-1", moved, apiVIP)
	st = waitStatus(t, admin, "master-1 holding the API VIP", func(s crd.ClusterVIPsStatus) bool { return lab.StatusHolder(s, apiVIP) == "master-1" })
	t.Logf("the status named the new holder %v after its annotation", time.Since(start).Round(time.Millisecond))
	if v := lab.VIPStatus(st, apiVIP); v.Since == nil || !v.Since.Time.Equal(moved) {
		t.Errorf("API VIP since %v, want %s (when master-1 took it)", v.Since, moved)
	}

	// Two holders of the ingress VIP: a split brain, Degraded; nobody
	// holding the API VIP: no holder.
	publish("master-1", moved, "198.51.100.6")
	st = waitStatus(t, admin, "a split brain on the ingress VIP", func(s crd.ClusterVIPsStatus) bool {
		return lab.StatusHolder(s, "198.51.100.6") == "master-0,master-1"
	})
	if v := lab.VIPStatus(st, apiVIP); v.Holder != "" || v.State != "no-holder" || v.Since == nil {
		t.Errorf("API VIP without holder: %+v, want state no-holder and since when", v)
	}
	wantCondition(t, st, crd.ConditionDegraded, metav1.ConditionTrue, statuswriter.ReasonSplitBrain, "198.51.100.6 (master-0,master-1)")
	wantCondition(t, st, crd.ConditionReady, metav1.ConditionFalse, statuswriter.ReasonNotHeld, "no holder: "+apiVIP)
	noHolderSince := lab.VIPStatus(st, apiVIP).Since

	// `oc get cvips` shows the holders and the pools' use.
	table := getTable(t, admin)
	for _, want := range []string{"API Holder", "In Use", "Free"} {
		if !strings.Contains(table, `"name":"`+want+`"`) {
			t.Errorf("oc get has no column %q: %s", want, table)
		}
	}
	if !strings.Contains(table, `"master-0,master-1",1,318,`) {
		t.Errorf("oc get does not show the ingress holders and the pools' use (1 in use, 315+3 free): %s", table)
	}
	if st.AddressesInUse != 1 || st.AddressesFree != 318 {
		t.Errorf("addresses in use %d, free %d: want 1 and 318", st.AddressesInUse, st.AddressesFree)
	}

	// A spec edit: generation 2, which no node runs yet; the VIP still
	// without holder keeps the time it was first seen so.
	obj, err := dynamic.NewForConfigOrDie(admin).Resource(crd.Resource).Patch(ctx, "lab", types.MergePatchType,
		[]byte(`{"spec":{"vrrp":{"avoidVirtualRouterIDs":[7]}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetGeneration() != 2 {
		t.Fatalf("generation %d after a spec edit, want 2", obj.GetGeneration())
	}
	st = waitStatus(t, admin, "generation 2 observed", func(s crd.ClusterVIPsStatus) bool { return s.ObservedGeneration == 2 })
	if !slices.Equal(st.Nodes, []crd.NodeStatus{{Name: "master-0", ObservedGeneration: 1, SpecDigest: digest}, {Name: "master-1", ObservedGeneration: 1, SpecDigest: digest}}) || st.SpecDigest == digest {
		t.Errorf("nodes after the edit: %+v, want both still on generation 1 and digest %s, the object on a new digest (%s)", st.Nodes, digest, st.SpecDigest)
	}
	if v := lab.VIPStatus(st, apiVIP); v.Since == nil || !v.Since.Equal(noHolderSince) {
		t.Errorf("API VIP without holder since %v, then %v: want the first time kept", noHolderSince, v.Since)
	}
	publish("master-1", moved, apiVIP)
	publish("master-0", since, "198.51.100.6")
	st = waitStatus(t, admin, "the API VIP held again", func(s crd.ClusterVIPsStatus) bool { return lab.StatusHolder(s, apiVIP) == "master-1" })
	wantCondition(t, st, crd.ConditionReady, metav1.ConditionFalse, statuswriter.ReasonNodesBehind, "not running generation 2 (its spec digest): master-0, master-1")
	wantCondition(t, st, crd.ConditionDegraded, metav1.ConditionFalse, statuswriter.ReasonAsExpected, "")

	// vipctl status shows the object's verdict after its table, and in
	// -o json.
	kubeconfig, _ := updateFiles(t, e.api, statusYAML)
	_, out, errOut := vipctl(t, "status", "--kubeconfig", kubeconfig)
	if want := "ClusterVIPs lab, generation 2:\n  Ready=False  NodesBehind: not running generation 2"; !strings.Contains(out, want) {
		t.Errorf("vipctl status does not show the object's verdict %q:\n%s%s", want, out, errOut)
	}
	_, out, _ = vipctl(t, "status", "--kubeconfig", kubeconfig, "-o", "json")
	var report status.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || report.Object == nil || report.Object.ObservedGeneration != 2 ||
		meta.FindStatusCondition(report.Object.Conditions, crd.ConditionDegraded) == nil {
		t.Errorf("vipctl status -o json: object %+v (%v), want generation 2's conditions", report.Object, err)
	}

	// master-0 stops renewing its kubelet's Lease and still claims the
	// API VIP it held (a node cut off keeps its annotation): an isolated
	// holder, not a split brain; master-1 holds it.
	for node, renewed := range map[string]time.Time{"master-0": time.Now().Add(-time.Minute), "master-1": time.Now()} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: status.NodeLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &metav1.MicroTime{Time: renewed}}}
		if _, err := e.admin.CoordinationV1().Leases(status.NodeLeaseNamespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	publish("master-0", since, apiVIP, "198.51.100.6")
	st = waitStatus(t, admin, "the API VIP isolated on master-0, held by master-1", func(s crd.ClusterVIPsStatus) bool {
		return lab.VIPStatus(s, apiVIP).State == status.StateIsolated
	})
	if v := lab.VIPStatus(st, apiVIP); v.Holder != "master-1" {
		t.Errorf("API VIP claimed by master-0 (unreachable) and master-1: %+v, want master-1 the holder", v)
	}
	wantCondition(t, st, crd.ConditionDegraded, metav1.ConditionTrue, statuswriter.ReasonUnreachable, "master-0")
	crdStatusTakeover(t, e, admin, publish)
	conditionMetricsAgree(t, a, admin)

	crdStatusRefused(t, admin)
}

// crdStatusTakeover: an unplanned failover is named at once, a real
// split brain within a renew interval. master-0 (isolated above) renews
// its Lease while still claiming the API VIP: both halves reach the API,
// a split brain, found without any prompt (the writer looks again every
// 5 s while a VIP is isolated). Then master-1, the older claimant, falls
// silent (its Lease renewed a moment ago, overdue only in 15 s) and
// master-0 claims the API VIP anew, as a node taking over from a node
// powered off does: master-0 is the holder as soon as its claim is
// read, not once master-1's Lease is overdue.
func crdStatusTakeover(t *testing.T, e *allocEnv, admin *rest.Config, publish func(string, time.Time, ...string)) {
	t.Helper()
	renew := func(node string, at time.Time) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, at.UTC().Format(metav1.RFC3339Micro))
		if _, err := e.admin.CoordinationV1().Leases(status.NodeLeaseNamespace).Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	renew("master-0", time.Now())
	waitStatus(t, admin, "a split brain once master-0 renews its Lease", func(s crd.ClusterVIPsStatus) bool {
		return lab.VIPStatus(s, apiVIP).State == status.StateSplitBrain
	})
	renew("master-1", time.Now())
	time.Sleep(100 * time.Millisecond)
	took := time.Now()
	publish("master-0", took, apiVIP, "198.51.100.6")
	var st crd.ClusterVIPsStatus
	if !lab.WaitUntil(10*time.Second, func() bool {
		st = lab.ClusterVIPs(t, admin, "lab").Status
		v := lab.VIPStatus(st, apiVIP)
		return v.Holder == "master-0" && v.State == status.StateIsolated
	}) {
		t.Fatalf("master-0 took the API VIP over from master-1, silent since: status %+v 10 s later, want master-0 the holder (master-1's Lease is not overdue yet)", lab.VIPStatus(st, apiVIP))
	}
	t.Logf("the takeover named %s after master-0's claim", time.Since(took).Round(time.Millisecond))
	wantCondition(t, st, crd.ConditionDegraded, metav1.ConditionTrue, statuswriter.ReasonUnreachable, "master-1")
}

// conditionMetricsAgree: the allocator exports the conditions it wrote,
// which the dashboard reads (vipctl_allocator_clustervips_condition):
// one series per condition of the status, 1 for True, none left of a
// reason the condition has no more (the ones before the takeover).
func conditionMetricsAgree(t *testing.T, a *lab.Allocator, admin *rest.Config) {
	t.Helper()
	want := map[string]float64{}
	for _, c := range lab.ClusterVIPs(t, admin, "lab").Status.Conditions {
		want[c.Type+"/"+c.Reason] = map[bool]float64{true: 1, false: 0}[c.Status == metav1.ConditionTrue]
	}
	got := map[string]float64{}
	ok := lab.WaitUntil(5*time.Second, func() bool {
		mfs, err := a.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "vipctl_allocator_clustervips_condition" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["clustervips"] == "lab" {
					got[l["type"]+"/"+l["reason"]] = m.GetGauge().GetValue()
				}
			}
		}
		return maps.Equal(got, want)
	})
	if !ok {
		t.Errorf("vipctl_allocator_clustervips_condition for lab: %v, want the status's %v", got, want)
	}
}

// crdStatusRefused: each held-out bad file the apiserver accepts and
// vipctl refuses (crdBadInput's validateOnly) gets, applied as an
// object, a status that says so at vipctl's field path. The lab's Nodes
// take the addresses examples/nodes/compact.yaml gives them, the node
// list `render --nodes` refuses node-addresses.yaml with.
func crdStatusRefused(t *testing.T, admin *rest.Config) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(admin)
	ctx := context.Background()
	nodes := nodesAddressedAsListed(t, admin, fixture.Repo("examples/nodes/compact.yaml"))
	checked := 0
	for name, want := range crdBadInput {
		if want.validateOnly == "" {
			continue
		}
		path := fixture.Repo("testdata/bad-input/" + name)
		c, err := v1alpha1.Load(path)
		var verr *v1alpha1.ValidationError
		field := "spec.vrrp"
		if errors.As(err, &verr) && len(verr.Errors) > 0 {
			field = verr.Errors[0].Field
		} else if err != nil {
			continue // refused before validation: two documents
		} else if errs := v1alpha1.ValidateNodes(c, nodes); len(errs) > 0 {
			field = errs[0].Field
		} else if _, err := vrid.ForCluster(c); err == nil {
			continue // refused only with a node list
		}
		obj := fixture.ReadObject(t, path)
		if _, err := dyn.Resource(crd.Resource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lab.WaitFor(t, 30*time.Second, name+": Degraded "+statuswriter.ReasonInvalidSpec+" at "+field, func() bool {
			c := meta.FindStatusCondition(lab.ClusterVIPs(t, admin, obj.GetName()).Status.Conditions, crd.ConditionDegraded)
			return c != nil && c.Reason == statuswriter.ReasonInvalidSpec && strings.Contains(c.Message, field)
		})
		if err := dyn.Resource(crd.Resource).Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: refused in the status at %s", name, field)
		checked++
	}
	if checked == 0 {
		t.Error("no bad file was both accepted by the apiserver and refused by vipctl")
	}
}

// nodesAddressedAsListed gives each Node of the apiserver that the node
// list at path names that list's addresses, and returns them.
func nodesAddressedAsListed(t *testing.T, admin *rest.Config, path string) []v1alpha1.NodeAddresses {
	t.Helper()
	listed, err := cluster.LoadNodeListFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	var set []cluster.Node
	for i, obj := range listed.Objects {
		n, err := client.CoreV1().Nodes().Get(ctx, obj.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = obj.Status.Addresses
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		set = append(set, listed.Nodes[i])
	}
	if len(set) == 0 {
		t.Fatalf("no Node of %s in the apiserver", path)
	}
	return cluster.Addresses(set)
}

func annotateNode(t *testing.T, e *allocEnv, node, key, value string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitStatus waits for the lab object's status to satisfy ok.
func waitStatus(t *testing.T, cfg *rest.Config, what string, ok func(crd.ClusterVIPsStatus) bool) crd.ClusterVIPsStatus {
	t.Helper()
	return lab.WaitClusterVIPsStatus(t, cfg, "lab", what, ok)
}

func wantCondition(t *testing.T, s crd.ClusterVIPsStatus, typ string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	c := meta.FindStatusCondition(s.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) {
		t.Errorf("condition %s: %+v, want %s %s with %q", typ, c, status, reason, msg)
	}
}

// getTable is `oc get cvips` as the apiserver serves it: a Table.
func getTable(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/apis/vipctl.io/v1alpha1/clustervips", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("oc get as a Table: %d %v: %s", resp.StatusCode, err, body)
	}
	return string(body)
}
