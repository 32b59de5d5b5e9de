package cluster

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

func TestEffective(t *testing.T) {
	static := fixture.Example(t, "compact-ipv4.yaml")
	live, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.ServicePools = append(live.Spec.ServicePools, v1alpha1.ServicePool{Name: "extra", Mode: v1alpha1.PoolModeVRRP, Addresses: []string{"198.51.100.200-198.51.100.210"}, Instances: 2, MaxHolders: 8})
	eff, drift, err := Effective(static, live)
	if err != nil {
		t.Fatal(err)
	}
	if drift || len(eff.Spec.ServicePools) != 2 {
		t.Errorf("a pool added in the ConfigMap: drift=%v pools=%d; want false, 2", drift, len(eff.Spec.ServicePools))
	}
	if len(static.Spec.ServicePools) != 1 {
		t.Errorf("Effective modified the static config")
	}

	// The bootstrap host comes from the ConfigMap: dropping it there
	// after the install reaches every node without a MachineConfig.
	installing := fixture.Example(t, "day1-bootstrap.yaml")
	dropped := fixture.Example(t, "day1-bootstrap.yaml")
	dropped.Spec.Bootstrap = nil
	if eff, drift, err := Effective(installing, dropped); err != nil || drift || eff.Spec.Bootstrap != nil || installing.Spec.Bootstrap == nil {
		t.Errorf("spec.bootstrap dropped in the ConfigMap: err=%v drift=%v bootstrap=%v; want it gone, no drift, the file untouched", err, drift, eff.Spec.Bootstrap)
	}

	// So does the load-balancer class: the allocator reads it there, and
	// a sidecar that took the file's would announce what it allocates not.
	classed := fixture.Example(t, "compact-ipv4.yaml")
	classed.Spec.LoadBalancerClass = &v1alpha1.LoadBalancerClassSpec{Name: "example.com/lb", Only: true}
	if eff, drift, err := Effective(static, classed); err != nil || drift || ClassOf(eff) != (Class{Name: "example.com/lb", Only: true}) {
		t.Errorf("spec.loadBalancerClass set in the ConfigMap: err=%v drift=%v class=%+v; want it taken, no drift", err, drift, ClassOf(eff))
	}

	// A static part changed in the ConfigMap is not taken, only noted.
	live.Spec.API.VIPs = []string{"198.51.100.9"}
	eff, drift, err = Effective(static, live)
	if err != nil || !drift || eff.Spec.API.VIPs[0] != static.Spec.API.VIPs[0] {
		t.Errorf("changed API VIP in the ConfigMap: drift=%v err=%v api=%v; want drift, the file's API VIP", drift, err, eff.Spec.API.VIPs)
	}

	// Pools that clash with the static parts are refused with their path.
	live.Spec.ServicePools[1].Addresses = []string{"198.51.100.130/33"}
	if _, _, err := Effective(static, live); err == nil || !strings.Contains(err.Error(), "spec.servicePools[1].addresses[0]") {
		t.Errorf("invalid ConfigMap pools: err = %v, want one naming spec.servicePools[1].addresses[0]", err)
	}
}

// TestReadConfigMap: the ConfigMap is read as a stored copy: a field a
// newer vipctl wrote is returned by its path and ignored, anything else
// wrong is an error naming the ConfigMap and the field.
func TestReadConfigMap(t *testing.T) {
	shipped, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := shipped.ShippedYAML()
	if err != nil {
		t.Fatal(err)
	}
	withPoolField := strings.Replace(string(data), "  servicePools:\n  - ", "  servicePools:\n  - futureKnob: 1\n    ", 1)
	for _, tc := range []struct {
		name    string
		data    map[string]string
		unknown v1alpha1.UnknownFields
		err     string
	}{
		{name: "as render writes it", data: map[string]string{v1alpha1.ConfigMapKey: string(data)}},
		{name: "a newer vipctl's field", data: map[string]string{v1alpha1.ConfigMapKey: withPoolField},
			unknown: v1alpha1.UnknownFields{"spec.servicePools[0].futureKnob"}},
		{name: "no key", err: `configmap vipctl-system/vipctl-config: no key "cluster.yaml"`},
		{name: "a known field of the wrong kind", data: map[string]string{v1alpha1.ConfigMapKey: strings.Replace(withPoolField, "futureKnob: 1", "maxPerNamespace: two", 1)},
			err: "configmap vipctl-system/vipctl-config: 1 invalid field(s):\n  spec.servicePools[0].maxPerNamespace: Invalid value: \"two\": must be a whole number, not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: "vipctl-system"}, Data: tc.data}
			c, unknown, err := ReadConfigMap(cm)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(unknown, tc.unknown) {
				t.Errorf("unknown = %q, want %q", unknown, tc.unknown)
			}
			if !equalYAML(c, shipped.Shipped()) {
				t.Errorf("decoded config differs from the shipped one")
			}
		})
	}
}
