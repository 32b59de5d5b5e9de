package v1alpha1

import "testing"

func TestSpecDigestIgnoresWhatDefaultsFillIn(t *testing.T) {
	bare, err := Decode([]byte(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.com
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
  ingress: [{name: default, vips: [198.51.100.6]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	defaulted := *bare
	defaulted.Spec.Ingress = append([]IngressSpec(nil), bare.Spec.Ingress...)
	SetDefaults(&defaulted)
	a, b := SpecDigest("lab", bare.Spec), SpecDigest("lab", defaulted.Spec)
	if a == "" || a != b {
		t.Fatalf("digest of the bare spec %q, of the defaulted one %q: want equal", a, b)
	}
	if bare.Spec.Ingress[0].Domain != "" {
		t.Errorf("SpecDigest defaulted its argument: ingress domain %q", bare.Spec.Ingress[0].Domain)
	}
	if c := SpecDigest("other", bare.Spec); c == a {
		t.Errorf("another cluster name gives the same digest %q: the default ingress domain derives from it", c)
	}
	moved := defaulted
	moved.Spec.API.VIPs = []string{"198.51.100.7"}
	if d := SpecDigest("lab", moved.Spec); d == a {
		t.Errorf("a moved API VIP gives the same digest %q", d)
	}
}
