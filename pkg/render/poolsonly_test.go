package render

import (
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestPoolsOnlyRendersNoAPI: in mode poolsOnly OpenShift's own keepalived
// and haproxy carry the API and ingress VIPs, so no node gets an api or
// ingress instance, the haproxy check script or haproxy.cfg, control-plane
// nodes included (the API redirect follows haproxy.cfg, so none is
// installed either); the pools' instances are all there.
func TestPoolsOnlyRendersNoAPI(t *testing.T) {
	t.Parallel()
	r := renderExample(t, "pools-only.yaml")
	for _, n := range r.nodes {
		if !n.ControlPlane {
			t.Fatalf("%s: the example's nodes must be control-plane nodes to prove anything", n.Name)
		}
		insts := instancesIn(t, r.files[n.Name])
		for _, inst := range insts {
			if !strings.HasPrefix(inst, "pool_") {
				t.Errorf("%s: instance %s in mode poolsOnly", n.Name, inst)
			}
		}
		if len(insts) != 8 { // two pools, two instances each, two families
			t.Errorf("%s: instances %v, want the pools' 8", n.Name, insts)
		}
		for _, f := range r.files[n.Name] {
			if f.Path == onnode.HaproxyConfPath {
				t.Errorf("%s: haproxy.cfg rendered in mode poolsOnly", n.Name)
			}
			if f.Path == onnode.KeepalivedConfPath && strings.Contains(string(f.Data), haproxyScriptName) {
				t.Errorf("%s: keepalived.conf tracks haproxy in mode poolsOnly", n.Name)
			}
		}
	}
}
