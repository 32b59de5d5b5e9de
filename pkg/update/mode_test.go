package update

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
)

// racksIn is examples/bgp-two-racks.yaml (spec.bgp already there: a
// static part the nodes must carry before any pool can be bgp) with its
// one pool, racks (203.0.113.224/28, two instances when vrrp), in mode.
func racksIn(t *testing.T, mode string) *v1alpha1.ClusterVIPs {
	t.Helper()
	c := fixture.Example(t, "bgp-two-racks.yaml")
	c.Spec.ServicePools[0].Mode = mode
	if errs := v1alpha1.Validate(c); len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

// liveIn is the ConfigMap's config after a first update with the racks
// pool in mode: every VRRP instance's ID pinned.
func liveIn(t *testing.T, mode string) *v1alpha1.ClusterVIPs {
	t.Helper()
	p, err := Compute(nil, racksIn(t, mode), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Desired
}

// TestModeVRRPToBGP: moving a pool to bgp names the mode change and the
// VRRP IDs it frees, drops the pool's pins from what is written, and
// takes no Service's address: a bgp pool has no anchors, so every address
// a Service holds stays valid.
func TestModeVRRPToBGP(t *testing.T) {
	t.Parallel()
	live := liveIn(t, "vrrp")
	liveIDs, err := vrid.ForCluster(live)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := v1alpha1.PoolKey("racks", 0), v1alpha1.PoolKey("racks", 1)
	if live.Spec.VRRP.VirtualRouterIDs[r0.String()] == 0 || live.Spec.VRRP.VirtualRouterIDs[r1.String()] == 0 {
		t.Fatalf("the live config pins no IDs for racks: %v", live.Spec.VRRP.VirtualRouterIDs)
	}
	svcs := []corev1.Service{fixture.LBService("a", "203.0.113.224"), fixture.LBService("b", "203.0.113.225"), fixture.LBService("c", "203.0.113.237")}
	p, err := Compute(live, racksIn(t, "bgp"), svcs)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Orphans) != 0 {
		t.Errorf("orphans %+v: a pool moved to bgp keeps every Service's address", p.Orphans)
	}
	for k := range p.Desired.Spec.VRRP.VirtualRouterIDs {
		if name, _, ok := v1alpha1.InstanceKey(k).Pool(); ok && name == "racks" {
			t.Errorf("the written config still pins %s", k)
		}
	}
	wantFreed := map[v1alpha1.InstanceKey]uint8{r0: liveIDs[r0], r1: liveIDs[r1]}
	if len(p.Pools) != 1 || strings.Join(p.Pools[0].Fields, ";") != "spec.servicePools[0].mode: vrrp -> bgp" ||
		!maps.Equal(p.Pools[0].Freed, wantFreed) || len(p.Pools[0].Taken) != 0 || len(p.Pools[0].IDs) != 0 {
		t.Errorf("pool changes %+v, want racks' mode changed and IDs %v freed", p.Pools, wantFreed)
	}
	if len(p.Static) != 0 {
		t.Errorf("static changes %v: the mode is a day-2 part", p.Static)
	}
	want := "~ pool racks (frees VRRP IDs pool/racks/0=" + itoa(liveIDs[r0]) + ", pool/racks/1=" + itoa(liveIDs[r1]) + ")\n" +
		"    spec.servicePools[0].mode: vrrp -> bgp\n" +
		"no MachineConfig change: no node reboots\n"
	if got := p.Text(); got != want {
		t.Errorf("plan text:\n%s\nwant:\n%s", got, want)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"fields":["spec.servicePools[0].mode: vrrp -\u003e bgp"]`) || !strings.Contains(s, `"freedIDs":{"pool/racks/0":`) {
		t.Errorf("plan as JSON: %s", s)
	}
	cl := Cluster{Kube: fake.NewClientset(), Namespace: "vipctl-system"}
	if err := cl.Apply(context.Background(), p, nil, false, io.Discard); err != nil {
		t.Errorf("without --force: %v, want applied", err)
	}
}

// TestModeBGPWithSpecBGP: a pool moved to bgp in the same update that
// adds spec.bgp is planned, with a warning: the nodes would refuse the
// pools until their new file arrives.
func TestModeBGPWithSpecBGP(t *testing.T) {
	t.Parallel()
	live := liveIn(t, "vrrp")
	live.Spec.BGP = nil
	p, err := Compute(live, racksIn(t, "bgp"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Static, ",") != "spec.bgp" || len(p.Warnings) != 1 || !strings.HasPrefix(p.Warnings[0], "pool racks becomes bgp while spec.bgp changes") {
		t.Errorf("static %v, warnings %q", p.Static, p.Warnings)
	}
	if text := p.Text(); !strings.Contains(text, "! pool racks becomes bgp while spec.bgp changes: ") || !strings.Contains(text, "roll spec.bgp out first, then move the pool") {
		t.Errorf("plan text:\n%s", text)
	}
	// With spec.bgp on the nodes already, no warning.
	if p, err := Compute(liveIn(t, "vrrp"), racksIn(t, "bgp"), nil); err != nil || len(p.Warnings) != 0 {
		t.Errorf("spec.bgp unchanged: %v, warnings %q", err, p.Warnings)
	}
}

// TestModeBGPToVRRP: moving a pool back to vrrp takes VRRP IDs (named in
// the plan) and makes the pool's last addresses its instances' anchors: a
// Service holding one is an orphan, and the update is refused without
// --force.
func TestModeBGPToVRRP(t *testing.T) {
	t.Parallel()
	live := liveIn(t, "bgp")
	if len(live.Spec.VRRP.VirtualRouterIDs) != 0 {
		t.Fatalf("a bgp pool got VRRP pins: %v", live.Spec.VRRP.VirtualRouterIDs)
	}
	svcs := []corev1.Service{fixture.LBService("a", "203.0.113.224"), fixture.LBService("anchored", "203.0.113.239")}
	p, err := Compute(live, racksIn(t, "vrrp"), svcs)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := vrid.ForCluster(p.Desired)
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := v1alpha1.PoolKey("racks", 0), v1alpha1.PoolKey("racks", 1)
	wantTaken := map[v1alpha1.InstanceKey]uint8{r0: ids[r0], r1: ids[r1]}
	if len(p.Pools) != 1 || strings.Join(p.Pools[0].Fields, ";") != "spec.servicePools[0].mode: bgp -> vrrp" ||
		!maps.Equal(p.Pools[0].Taken, wantTaken) || len(p.Pools[0].Freed) != 0 {
		t.Errorf("pool changes %+v, want racks' mode changed and IDs %v taken", p.Pools, wantTaken)
	}
	for k, id := range wantTaken {
		if p.Desired.Spec.VRRP.VirtualRouterIDs[k.String()] != int(id) {
			t.Errorf("%s=%d not pinned in the written config: %v", k, id, p.Desired.Spec.VRRP.VirtualRouterIDs)
		}
	}
	wantOrphan := Orphan{Service: "default/anchored", Addresses: []string{"203.0.113.239"}, Reason: anchorReason("racks")}
	if len(p.Orphans) != 1 || p.Orphans[0].Service != wantOrphan.Service || strings.Join(p.Orphans[0].Addresses, ",") != "203.0.113.239" || p.Orphans[0].Reason != wantOrphan.Reason {
		t.Errorf("orphans %+v, want %+v", p.Orphans, wantOrphan)
	}
	text := p.Text()
	for _, want := range []string{
		"~ pool racks (takes VRRP IDs pool/racks/0=" + itoa(ids[r0]) + ", pool/racks/1=" + itoa(ids[r1]) + ")\n    spec.servicePools[0].mode: bgp -> vrrp\n",
		"! Service default/anchored would lose 203.0.113.239 (it becomes a VRRP anchor of pool racks, which no Service may hold)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	err = (Cluster{}).Apply(context.Background(), p, nil, false, io.Discard)
	if !errors.Is(err, ErrOrphans) || !strings.Contains(err.Error(), "default/anchored (203.0.113.239)") {
		t.Errorf("without --force: %v, want refused naming default/anchored", err)
	}
}

func itoa(id uint8) string {
	b, _ := json.Marshal(id)
	return string(b)
}
