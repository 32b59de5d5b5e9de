package machineconfig

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// TestFileData reads back, byte for byte, every file a MachineConfig
// ships, from the object as the API returns it.
func TestFileData(t *testing.T) {
	t.Parallel()
	mc, err := Build("50-vipctl-worker", "worker", openshiftrelease.Release{Major: 4, Minor: 19}, sampleFiles())
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	for _, f := range sampleFiles() {
		got, ok, err := FileData(obj, f.Path)
		if err != nil || !ok || !bytes.Equal(got, f.Data) {
			t.Errorf("%s: %q %v %v, want %q", f.Path, got, ok, err, f.Data)
		}
	}
	if _, ok, err := FileData(obj, "/etc/vipctl/absent"); ok || err != nil {
		t.Errorf("a path it does not ship: %v %v", ok, err)
	}
}
