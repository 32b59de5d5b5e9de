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

	"github.com/vipctl/vipctl/internal/fixture"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// modeYAML has spec.bgp already (a static part the nodes must carry
// before any pool can be bgp) and one pool, web, in the given mode.
func modeYAML(mode string) string {
	return `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
  servicePools:
    - name: web
      mode: ` + mode + `
      addresses: [198.51.100.128/27]
  bgp:
    asn: 64513
    peers:
      - address: 198.51.100.1
        asn: 64512
`
}

// liveConfig is the ConfigMap's config after a first update of file:
// every VRRP instance's ID pinned.
func liveConfig(t *testing.T, file string) *v1alpha1.ClusterVIPs {
	t.Helper()
	p, err := Compute(nil, parseConfig(t, file), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Desired
}

func parseConfig(t *testing.T, file string) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestModeVRRPToBGP: moving a pool to bgp names the mode change and the
// VRRP IDs it frees, drops the pool's pins from what is written, and
// takes no Service's address: a bgp pool has no anchors, so every address
// a Service holds stays valid.
func TestModeVRRPToBGP(t *testing.T) {
	t.Parallel()
	live := liveConfig(t, modeYAML("vrrp"))
	liveIDs, err := vrid.ForCluster(live)
	if err != nil {
		t.Fatal(err)
	}
	web0, web1 := v1alpha1.PoolKey("web", 0), v1alpha1.PoolKey("web", 1)
	if live.Spec.VRRP.VirtualRouterIDs[web0.String()] == 0 || live.Spec.VRRP.VirtualRouterIDs[web1.String()] == 0 {
		t.Fatalf("the live config pins no IDs for web: %v", live.Spec.VRRP.VirtualRouterIDs)
	}
	svcs := []corev1.Service{fixture.LBService("a", "198.51.100.128"), fixture.LBService("b", "198.51.100.129"), fixture.LBService("c", "198.51.100.157")}
	p, err := Compute(live, parseConfig(t, modeYAML("bgp")), svcs)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Orphans) != 0 {
		t.Errorf("orphans %+v: a pool moved to bgp keeps every Service's address", p.Orphans)
	}
	for k := range p.Desired.Spec.VRRP.VirtualRouterIDs {
		if name, _, ok := v1alpha1.InstanceKey(k).Pool(); ok && name == "web" {
			t.Errorf("the written config still pins %s", k)
		}
	}
	wantFreed := map[v1alpha1.InstanceKey]uint8{web0: liveIDs[web0], web1: liveIDs[web1]}
	if len(p.Pools) != 1 || strings.Join(p.Pools[0].Fields, ";") != "mode: vrrp -> bgp" ||
		!maps.Equal(p.Pools[0].Freed, wantFreed) || len(p.Pools[0].Taken) != 0 || len(p.Pools[0].IDs) != 0 {
		t.Errorf("pool changes %+v, want web's mode changed and IDs %v freed", p.Pools, wantFreed)
	}
	if len(p.Static) != 0 {
		t.Errorf("static changes %v: the mode is a day-2 part", p.Static)
	}
	want := "~ pool web (frees VRRP IDs pool/web/0=" + itoa(liveIDs[web0]) + ", pool/web/1=" + itoa(liveIDs[web1]) + ")\n" +
		"    mode: vrrp -> bgp\n" +
		"no MachineConfig change: no node reboots\n"
	if got := p.Text(); got != want {
		t.Errorf("plan text:\n%s\nwant:\n%s", got, want)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"fields":["mode: vrrp -\u003e bgp"]`) || !strings.Contains(s, `"freedIDs":{"pool/web/0":`) {
		t.Errorf("plan as JSON: %s", s)
	}
	cl := Cluster{Kube: fake.NewClientset(), Namespace: "vipctl-system"}
	if err := cl.Apply(context.Background(), p, nil, false, io.Discard); err != nil {
		t.Errorf("without --force: %v, want applied", err)
	}
}

// TestModeBGPToVRRP: moving a pool back to vrrp takes VRRP IDs (named in
// the plan) and makes the pool's last addresses its instances' anchors: a
// Service holding one is an orphan, and the update is refused without
// --force.
func TestModeBGPToVRRP(t *testing.T) {
	t.Parallel()
	live := liveConfig(t, modeYAML("bgp"))
	if len(live.Spec.VRRP.VirtualRouterIDs) != 0 {
		t.Fatalf("a bgp pool got VRRP pins: %v", live.Spec.VRRP.VirtualRouterIDs)
	}
	svcs := []corev1.Service{fixture.LBService("a", "198.51.100.128"), fixture.LBService("anchored", "198.51.100.159")}
	p, err := Compute(live, parseConfig(t, modeYAML("vrrp")), svcs)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := vrid.ForCluster(p.Desired)
	if err != nil {
		t.Fatal(err)
	}
	web0, web1 := v1alpha1.PoolKey("web", 0), v1alpha1.PoolKey("web", 1)
	wantTaken := map[v1alpha1.InstanceKey]uint8{web0: ids[web0], web1: ids[web1]}
	if len(p.Pools) != 1 || strings.Join(p.Pools[0].Fields, ";") != "mode: bgp -> vrrp" ||
		!maps.Equal(p.Pools[0].Taken, wantTaken) || len(p.Pools[0].Freed) != 0 {
		t.Errorf("pool changes %+v, want web's mode changed and IDs %v taken", p.Pools, wantTaken)
	}
	for k, id := range wantTaken {
		if p.Desired.Spec.VRRP.VirtualRouterIDs[k.String()] != int(id) {
			t.Errorf("%s=%d not pinned in the written config: %v", k, id, p.Desired.Spec.VRRP.VirtualRouterIDs)
		}
	}
	wantOrphan := Orphan{Service: "default/anchored", Addresses: []string{"198.51.100.159"}, Reason: anchorReason("web")}
	if len(p.Orphans) != 1 || p.Orphans[0].Service != wantOrphan.Service || strings.Join(p.Orphans[0].Addresses, ",") != "198.51.100.159" || p.Orphans[0].Reason != wantOrphan.Reason {
		t.Errorf("orphans %+v, want %+v", p.Orphans, wantOrphan)
	}
	text := p.Text()
	for _, want := range []string{
		"~ pool web (takes VRRP IDs pool/web/0=" + itoa(ids[web0]) + ", pool/web/1=" + itoa(ids[web1]) + ")\n    mode: bgp -> vrrp\n",
		"! Service default/anchored would lose 198.51.100.159 (it becomes a VRRP anchor of pool web, which no Service may hold)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	err = (Cluster{}).Apply(context.Background(), p, nil, false, io.Discard)
	if !errors.Is(err, ErrOrphans) || !strings.Contains(err.Error(), "default/anchored (198.51.100.159)") {
		t.Errorf("without --force: %v, want refused naming default/anchored", err)
	}
}

func itoa(id uint8) string {
	b, _ := json.Marshal(id)
	return string(b)
}
