package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
)

// TestDNSNamesFit: every name the VIPs' records get must fit the DNS,
// and one domain has one IngressController (issue 47, class 6).
func TestDNSNamesFit(t *testing.T) {
	t.Parallel()
	label64 := strings.Repeat("a", 64)
	// 4 labels of 60 and one of 9: 253 characters, a valid subdomain,
	// but api-int.ostest.<it> is 268.
	long := strings.Repeat(strings.Repeat("b", 60)+".", 4) + "example.t"
	// 252 characters: its wildcard is 254.
	wide := strings.Repeat(strings.Repeat("c", 60)+".", 4) + "examp.te"
	runParseErrors(t, base, exact([]parseErrorCase{
		{
			name: "a baseDomain label over 63 characters",
			edit: replace("baseDomain: example.test", "baseDomain: "+label64+".test"),
			want: []string{`spec.baseDomain: Invalid value: "` + label64 + `.test": the label aaaaaaaaaaaaaaaa... is 64 characters; a DNS label holds at most 63`},
		},
		{
			name: "an API name over 253 characters",
			edit: replace("baseDomain: example.test", "baseDomain: "+long),
			want: []string{`spec.baseDomain: Invalid value: "` + long + `": api-int.ostest.<baseDomain> would be 268 characters; a DNS name holds at most 253`},
		},
		{
			name: "a shard's domain with a long label, another's wildcard too long",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n    - name: a\n      domain: "+label64+".example.test\n      vips: [198.51.100.7]\n    - name: b\n      domain: "+wide+"\n      vips: [198.51.100.8]\n"),
			want: []string{
				`spec.ingress[1].domain: Invalid value: "` + label64 + `.example.test": the label aaaaaaaaaaaaaaaa... is 64 characters; a DNS label holds at most 63`,
				`spec.ingress[2].domain: Invalid value: "` + wide + `": its wildcard *.<domain> would be 254 characters; a DNS name holds at most 253`,
			},
		},
		{
			name: "two IngressControllers with one domain, one of them by default",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n    - name: shard\n      domain: apps.ostest.example.test\n      vips: [198.51.100.7]\n"),
			want: []string{`spec.ingress[1].domain: Duplicate value: "apps.ostest.example.test (also spec.ingress[0].domain): one domain, one IngressController, one wildcard record"`},
		},
	}))
	// The longest that fits: api-int.ostest.<base> of exactly 253.
	fits := strings.Repeat(strings.Repeat("b", 60)+".", 3) + strings.Repeat("d", 50) + ".test"
	if n := len("api-int.ostest." + fits); n != 253 {
		t.Fatalf("test: %d characters", n)
	}
	if _, err := Parse([]byte(replace("baseDomain: example.test", "baseDomain: "+fits)(base))); err != nil {
		t.Errorf("253 characters: %v", err)
	}
}

// TestShippedKeepsMetadataHome: the copy written into the cluster
// carries the name and nothing else of metadata (issue 47, class 6:
// 1.2 MiB of annotations ended up in the ConfigMap and every
// MachineConfig although the reference said they were copied nowhere),
// and the file's own copy is left as it was.
func TestShippedKeepsMetadataHome(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(strings.Replace(base, "  name: ostest\n", "  name: ostest\n  labels: {team: net}\n  annotations: {note: \""+strings.Repeat("x", 1<<20)+"\"}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.ShippedYAML()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, "annotations") || strings.Contains(s, "labels:\n    team") || !strings.Contains(s, "name: ostest") || len(s) > 4096 {
		t.Errorf("shipped copy (%d bytes):\n%.600s", len(s), s)
	}
	if c.Metadata.Labels["team"] != "net" || len(c.Metadata.Annotations["note"]) != 1<<20 {
		t.Error("Shipped changed the file's own copy")
	}
	// A field added to ObjectMeta must be decided on: shipped or kept home.
	if n := reflect.TypeFor[ObjectMeta]().NumField(); n != 3 {
		t.Errorf("ObjectMeta has %d fields: decide in Shipped whether the new one is copied into the cluster", n)
	}
}
