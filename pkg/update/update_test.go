package update

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
	"github.com/vipctl/vipctl/test/fixture"
)

func loadText(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(fixture.Repo("examples/pools-node-groups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEditsAndPlan(t *testing.T) {
	live := fixture.Example(t, "pools-node-groups.yaml")
	liveIDs, err := vrid.ForCluster(live)
	if err != nil {
		t.Fatal(err)
	}
	// Remove the first pool and add one: the remaining pool keeps its IDs
	// although its position changed, the new one gets free IDs.
	_, desired, err := ApplyEdits(loadText(t), []Edit{{Op: "remove", Spec: "rack-a"}, {Op: "add", Spec: "new=198.51.100.64/27"}})
	if err != nil {
		t.Fatal(err)
	}
	svcs := []corev1.Service{fixture.LBService("web", "198.51.100.130"), fixture.LBService("edge", "203.0.113.70")}
	p, err := Compute(live, desired, svcs)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := vrid.ForCluster(p.Desired)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []v1alpha1.InstanceKey{"pool/edge/0", "pool/edge/1"} {
		if ids[k] != liveIDs[k] {
			t.Errorf("%s renumbered %d -> %d", k, liveIDs[k], ids[k])
		}
	}
	used := map[uint8]v1alpha1.InstanceKey{}
	for k, id := range ids {
		if prev, dup := used[id]; dup {
			t.Errorf("ID %d for %s and %s", id, k, prev)
		}
		used[id] = k
	}
	text := p.Text()
	for _, want := range []string{"+ pool new (VRRP IDs pool/new/0=", "- pool rack-a", "! Service default/web would lose 198.51.100.130", "no MachineConfig change"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	if len(p.Orphans) != 1 || p.Orphans[0].Service != "default/web" {
		t.Errorf("orphans %+v, want default/web only (edge's address is still in a pool)", p.Orphans)
	}

	// Resizing: the changed field is named.
	_, resized, err := ApplyEdits(loadText(t), []Edit{{Op: "set", Spec: "edge=203.0.113.64/28"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err = Compute(live, resized, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Pools) != 1 || p.Pools[0].Change != "changed" || !strings.Contains(strings.Join(p.Pools[0].Fields, ";"), "addresses") {
		t.Errorf("resize plan %+v", p.Pools)
	}

	// A static change is called out.
	moved := *live
	moved.Spec.API.VIPs = []string{"198.51.100.9"}
	p, err = Compute(live, &moved, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Static, ",") != "spec.api" || !strings.Contains(p.Text(), "reboot") {
		t.Errorf("static change: %v\n%s", p.Static, p.Text())
	}

	// Dropping the bootstrap host after the install is a day-2 change:
	// the sidecars render without it, no node reboots.
	installing := *live
	installing.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Addresses: []string{"198.51.100.9"}}
	p, err = Compute(&installing, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Static) != 0 || p.Empty() || !strings.Contains(p.Text(), "~ spec.bootstrap removed: the control-plane nodes stop accepting VRRP adverts from 198.51.100.9\nno MachineConfig change: no node reboots") {
		t.Errorf("dropping spec.bootstrap: static %v, empty %v\n%s", p.Static, p.Empty(), p.Text())
	}

	// No ConfigMap yet: create.
	p, err = Compute(nil, live, nil)
	if err != nil || !p.Create {
		t.Errorf("first update: %+v %v", p, err)
	}
}

func TestBadEditsRefused(t *testing.T) {
	live := loadText(t)
	cases := []struct {
		edit Edit
		want string
	}{
		{Edit{Op: "add", Spec: "x=198.51.100.0/33"}, `spec.servicePools[2].addresses[0]: Invalid value: "198.51.100.0/33"`},
		{Edit{Op: "add", Spec: "x=198.51.100.130/32"}, "overlaps spec.servicePools[0].addresses[0]"},
		{Edit{Op: "add", Spec: "rack-a=198.51.100.64/27"}, "pool rack-a exists"},
		{Edit{Op: "set", Spec: "nope=198.51.100.64/27"}, "no pool nope"},
		{Edit{Op: "remove", Spec: "nope"}, "no pool nope"},
		{Edit{Op: "add", Spec: "x"}, "want NAME=CIDR|RANGE"},
		{Edit{Op: "add", Spec: "x=198.51.100.5/32"}, "inside service pool"},
	}
	for _, tc := range cases {
		_, _, err := ApplyEdits(live, []Edit{tc.edit})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.edit, err, tc.want)
		}
	}
}
