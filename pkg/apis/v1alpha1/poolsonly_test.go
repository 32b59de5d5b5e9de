package v1alpha1

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// poolsOnlyBase is a cluster whose API and ingress VIPs OpenShift's own
// keepalived carries: vipctl gets only the pools.
const poolsOnlyBase = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata:
  name: ostest
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  mode: poolsOnly
  servicePools:
    - name: a
      addresses: [198.51.100.128/26]
`

// TestPoolsOnlyParses: a pools-only file needs no spec.api, gets no API
// defaults (so nothing API-shaped reaches the nodes' cluster file) and
// names no api or ingress instance; it survives a round trip through the
// YAML the ConfigMap and the nodes' cluster file hold.
func TestPoolsOnlyParses(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(poolsOnlyBase))
	if err != nil {
		t.Fatal(err)
	}
	if !c.PoolsOnly() {
		t.Error("PoolsOnly() = false")
	}
	if !reflect.DeepEqual(c.Spec.API, APISpec{}) {
		t.Errorf("spec.api defaulted in mode poolsOnly: %+v", c.Spec.API)
	}
	if got := Strings(c.InstanceKeys()); strings.Join(got, " ") != "pool/a/0 pool/a/1" {
		t.Errorf("InstanceKeys = %v, want only the pool's", got)
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "vips") || strings.Contains(string(data), "port") {
		t.Errorf("the written file carries API fields:\n%s", data)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("written file does not parse: %v\n%s", err, data)
	}
	if !back.PoolsOnly() {
		t.Error("mode lost in the round trip")
	}
	// The default mode is never written out: an older sidecar reading the
	// ConfigMap would refuse an unknown field.
	full, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if full.PoolsOnly() || full.Spec.Mode != "" {
		t.Errorf("mode of a file without one = %q", full.Spec.Mode)
	}
}

// TestPoolsOnlyErrors pins what mode poolsOnly refuses, with its path:
// anything OpenShift's keepalived carries. A file that only forgets
// spec.api is still refused in the default mode.
func TestPoolsOnlyErrors(t *testing.T) {
	t.Parallel()
	runParseErrors(t, poolsOnlyBase, []parseErrorCase{
		{
			name: "an API VIP beside OpenShift's keepalived",
			edit: replace("  mode: poolsOnly\n", "  mode: poolsOnly\n  api: {vips: [198.51.100.5]}\n"),
			want: []string{`spec.api: Forbidden: mode poolsOnly: OpenShift's own keepalived and haproxy carry the API VIP; leave spec.api out`},
		},
		{
			name: "only an API port",
			edit: replace("  mode: poolsOnly\n", "  mode: poolsOnly\n  api: {port: 6443}\n"),
			want: []string{`spec.api: Forbidden: mode poolsOnly`},
		},
		{
			name: "an ingress VIP beside OpenShift's keepalived",
			edit: replace("  mode: poolsOnly\n", "  mode: poolsOnly\n  ingress: [{name: default, vips: [198.51.100.6]}]\n"),
			want: []string{`spec.ingress: Forbidden: mode poolsOnly: OpenShift's own keepalived carries the ingress VIP; leave spec.ingress out`},
		},
		{
			name: "unknown mode",
			edit: replace("mode: poolsOnly", "mode: pools"),
			want: []string{`spec.mode: Unsupported value: "pools": supported values: "full", "poolsOnly"`},
		},
		{
			name: "spec.api forgotten in the default mode",
			edit: replace("  mode: poolsOnly\n", ""),
			want: []string{`spec.api.vips: Required value: the API VIP, one per IP family`},
		},
		{
			name: "spec.api forgotten in mode full",
			edit: replace("mode: poolsOnly", "mode: full"),
			want: []string{`spec.api.vips: Required value: the API VIP, one per IP family`},
		},
		{
			name: "a pin for the API instance vipctl does not run",
			edit: replace("  servicePools:", "  vrrp: {virtualRouterIDs: {api: 20}}\n  servicePools:"),
			want: []string{`spec.vrrp.virtualRouterIDs[api]: Invalid value: "api": no such VRRP instance; known: pool/a/0, pool/a/1`},
		},
	})
}
