package update

import (
	"context"
	"io"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
)

// otherValue is a value of t's kind other than its zero value, for every
// kind a ServicePool field has; ok false for a kind it does not know.
func otherValue(t reflect.Type) (v reflect.Value, ok bool) {
	v = reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		elem, ok := otherValue(t.Elem())
		if !ok {
			return v, false
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(elem)
		v.Set(p)
	case reflect.Slice:
		elem, ok := otherValue(t.Elem())
		if !ok {
			return v, false
		}
		v.Set(reflect.Append(v, elem))
	case reflect.Struct:
		// A value in its first field alone (a pool's bgp: its peers).
		if t.NumField() == 0 {
			return v, false
		}
		f, ok := otherValue(t.Field(0).Type)
		if !ok {
			return v, false
		}
		v.Field(0).Set(f)
	case reflect.Map:
		key, ok1 := otherValue(t.Key())
		elem, ok2 := otherValue(t.Elem())
		if !ok1 || !ok2 {
			return v, false
		}
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(key, elem)
	default:
		return v, false
	}
	return v, true
}

// TestPoolDiffComparesEveryField: for every field of v1alpha1.ServicePool,
// a pool that differs in that field alone gives exactly one line naming
// the field's path in the file and both values. A field added to the type
// and left out of poolDiff fails here (on main, 5 of the 15 fields were:
// maxPerNamespace, shareAcrossNamespaces, externalIPs, interface,
// interfaceLabel, and an edit of one alone was never written).
func TestPoolDiffComparesEveryField(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[v1alpha1.ServicePool]()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			var a, b v1alpha1.ServicePool
			other, ok := otherValue(f.Type)
			if !ok {
				t.Fatalf("ServicePool.%s is a %s: teach otherValue a value of it", f.Name, f.Type)
			}
			reflect.ValueOf(&b).Elem().Field(i).Set(other)
			want := "spec.servicePools[3]." + jsonName(f) + ": " + compact(reflect.ValueOf(a).Field(i).Interface()) + " -> " + compact(other.Interface())
			if got := poolDiff(3, a, b); len(got) != 1 || got[0] != want {
				t.Errorf("poolDiff of a pool whose %s alone changed: %q, want [%q]", f.Name, got, want)
			}
			if got := poolDiff(3, b, b); len(got) != 0 {
				t.Errorf("poolDiff of equal pools: %q, want none", got)
			}
		})
	}
}

// TestPoolFieldEditAloneIsPlannedAndWritten: an edit of one of the pool
// fields poolDiff left out on main, alone, is a changed pool in the plan
// (its field path and both values, no reboot) and is written into the
// ConfigMap. On main each gave an empty plan and wrote nothing.
func TestPoolFieldEditAloneIsPlannedAndWritten(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(*v1alpha1.ServicePool)
		line string
	}{
		{"maxPerNamespace", func(p *v1alpha1.ServicePool) { p.MaxPerNamespace = 5 }, "spec.servicePools[1].maxPerNamespace: 0 -> 5"},
		{"shareAcrossNamespaces", func(p *v1alpha1.ServicePool) { p.ShareAcrossNamespaces = true }, "spec.servicePools[1].shareAcrossNamespaces: false -> true"},
		{"externalIPs", func(p *v1alpha1.ServicePool) { p.ExternalIPs = true }, "spec.servicePools[1].externalIPs: false -> true"},
		{"interface", func(p *v1alpha1.ServicePool) { p.Interface = "bond0.100" }, `spec.servicePools[1].interface: "" -> bond0.100`},
		{"interfaceLabel", func(p *v1alpha1.ServicePool) { p.InterfaceLabel = "vipctl.io/dmz-interface" }, `spec.servicePools[1].interfaceLabel: "" -> vipctl.io/dmz-interface`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := fixture.Example(t, "pools-node-groups.yaml")
			first, err := Compute(nil, base, nil)
			if err != nil {
				t.Fatal(err)
			}
			live := first.Desired
			desired := *live
			desired.Spec.ServicePools = append([]v1alpha1.ServicePool(nil), live.Spec.ServicePools...)
			tc.edit(&desired.Spec.ServicePools[1])
			p, err := Compute(live, &desired, nil)
			if err != nil {
				t.Fatal(err)
			}
			name := desired.Spec.ServicePools[1].Name
			if p.Empty() || len(p.Pools) != 1 || p.Pools[0].Name != name || p.Pools[0].Change != "changed" ||
				len(p.Pools[0].Fields) != 1 || p.Pools[0].Fields[0] != tc.line || len(p.Static) != 0 {
				t.Fatalf("plan %+v (static %v), want pool %s changed with %q alone", p.Pools, p.Static, name, tc.line)
			}
			wantText := "~ pool " + name + "\n    " + tc.line + "\nno MachineConfig change: no node reboots\n"
			if got := p.Text(); got != wantText {
				t.Errorf("plan text:\n%s\nwant:\n%s", got, wantText)
			}

			// Written: the ConfigMap the sidecars and the allocator read
			// holds the edit.
			got := appliedOver(t, live, p)
			if !reflect.DeepEqual(got.Spec.ServicePools[1], desired.Spec.ServicePools[1]) {
				t.Errorf("the ConfigMap's pool after the update:\n%+v\nwant:\n%+v", got.Spec.ServicePools[1], desired.Spec.ServicePools[1])
			}
		})
	}
}

// appliedOver applies p to a ConfigMap holding live and returns the
// config the ConfigMap holds after.
func appliedOver(t *testing.T, live *v1alpha1.ClusterVIPs, p *Plan) *v1alpha1.ClusterVIPs {
	t.Helper()
	data, err := live.ShippedYAML()
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: "vipctl-system"}, Data: map[string]string{v1alpha1.ConfigMapKey: string(data)}}
	cl := Cluster{Kube: fake.NewClientset(cm), Namespace: "vipctl-system"}
	if err := cl.Apply(context.Background(), p, cm, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, _, err := cl.Live(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCompact: a plan line's values fit on one line and read the same
// whatever their length: a list of one address is a list, as one of two
// is (on main it came out as YAML's "- 198.51.100.128/27").
func TestCompact(t *testing.T) {
	t.Parallel()
	no := false
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"one address", []string{"198.51.100.128/27"}, `["198.51.100.128/27"]`},
		{"two addresses", []string{"198.51.100.128/27", "2001:db8::/64"}, `["198.51.100.128/27","2001:db8::/64"]`},
		{"no list", []int(nil), "[]"},
		{"no map", map[string]string(nil), "{}"},
		{"one label", map[string]string{"pool": "web"}, `{"pool":"web"}`},
		{"empty string", "", `""`},
		{"string", "bond0.100", "bond0.100"},
		{"number", 5, "5"},
		{"unset pointer", (*bool)(nil), "null"},
		{"false pointer", &no, "false"},
	}
	for _, tc := range cases {
		if got := compact(tc.v); got != tc.want {
			t.Errorf("%s: compact(%#v) = %s, want %s", tc.name, tc.v, got, tc.want)
		}
	}
}
