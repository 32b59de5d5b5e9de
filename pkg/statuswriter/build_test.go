package statuswriter

import (
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/status"
)

func spec(t *testing.T, pools string) v1alpha1.ClusterVIPsSpec {
	t.Helper()
	c, err := v1alpha1.Decode([]byte(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.com
  machineNetworks: [198.51.100.0/24, "2001:db8:100::/64"]
  api: {vips: [198.51.100.5]}
` + pools))
	if err != nil {
		t.Fatal(err)
	}
	return c.Spec
}

// An IPv6 pool larger than an int64 counts as the largest int64 free,
// and so do the totals: no overflow into negative numbers.
func TestBuildCapsHugePools(t *testing.T) {
	s := spec(t, `  servicePools:
    - {name: big, addresses: ["2001:db8:100::/64"]}
    - {name: more, addresses: ["2001:db8:100:0:8000::/65"]}
`)
	s.ServicePools[1].Addresses = []string{"198.51.100.128/28"}
	st := Build("lab", 3, s, crd.ClusterVIPsStatus{}, nil, nil, status.Reach{}, time.Now())
	if len(st.Pools) != 2 || st.Pools[0].Free != math.MaxInt64 || st.Pools[1].Free != 16-2 {
		t.Fatalf("pools %+v, want big at the largest int64 free, more with 14", st.Pools)
	}
	if st.AddressesFree != math.MaxInt64 || st.AddressesInUse != 0 {
		t.Errorf("totals: %d in use, %d free; want 0 and the largest int64", st.AddressesInUse, st.AddressesFree)
	}
	if st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
	}
}

// A spec the apiserver took but vipctl refuses reports no VIPs and says
// why in both conditions.
func TestBuildRefusedSpec(t *testing.T) {
	s := spec(t, "")
	s.API.VIPs = []string{"203.0.113.5"} // outside every machine network
	prev := crd.ClusterVIPsStatus{VIPs: []crd.VIPStatus{{Address: "198.51.100.5", Instance: "api", Holder: "master-0"}}}
	st := Build("lab", 2, s, prev, nil, nil, status.Reach{}, time.Now())
	if len(st.VIPs) != 0 {
		t.Errorf("vips of a refused spec: %+v", st.VIPs)
	}
	for _, typ := range []string{crd.ConditionReady, crd.ConditionDegraded} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		want := metav1.ConditionTrue
		if typ == crd.ConditionReady {
			want = metav1.ConditionFalse
		}
		if c == nil || c.Status != want || c.Reason != ReasonInvalidSpec || c.ObservedGeneration != 2 {
			t.Errorf("%s: %+v, want %s %s at generation 2", typ, c, want, ReasonInvalidSpec)
		}
	}
}

// A pool holding a Node's own address (what `vipctl validate --nodes`
// refuses, and the apiserver cannot know) is reported in Degraded at
// vipctl's field path, naming the node; the Node reaches Build through
// the informer's stripNode, as the writer runs it.
func TestBuildNodeAddressInPool(t *testing.T) {
	s := spec(t, `  servicePools:
    - {name: general, addresses: [198.51.100.12-198.51.100.20]}
`)
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "master-1", Labels: map[string]string{"node-role.kubernetes.io/master": "", "kubernetes.io/os": "linux"},
			Annotations: map[string]string{
				v1alpha1.AnnotationNodeVIPs:    v1alpha1.HeldVIPs{{Address: "198.51.100.5", Instance: v1alpha1.KeyAPI, Since: time.Now()}}.String(),
				"machine.openshift.io/machine": "x",
			}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "master-1"}, {Type: corev1.NodeInternalIP, Address: "198.51.100.13"},
		}},
	}
	obj, err := stripNode(full)
	if err != nil {
		t.Fatal(err)
	}
	n := *obj.(*corev1.Node)
	if len(n.Status.Addresses) != 1 || len(n.Labels) != 1 || len(n.Annotations) != 1 {
		t.Errorf("stripped Node %+v: want the InternalIP, one role label and vipctl's annotation", n)
	}
	st := Build("lab", 1, s, crd.ClusterVIPsStatus{}, []corev1.Node{n, {ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}}, nil, status.Reach{}, time.Now())
	c := meta.FindStatusCondition(st.Conditions, crd.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalidSpec ||
		!strings.Contains(c.Message, "spec.servicePools[0].addresses[0]") || !strings.Contains(c.Message, "master-1") {
		t.Errorf("Degraded %+v, want %s at spec.servicePools[0].addresses[0] naming master-1", c, ReasonInvalidSpec)
	}
	if len(st.VIPs) != 1 {
		t.Errorf("VIPs %+v: a spec the sidecars still run reports its VIPs", st.VIPs)
	}
}
