package kubeletlab

import (
	"bytes"
	"testing"

	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// The lab lays down what the MachineConfig carries: every file, with its
// mode and bytes, whichever data URL encoding the builder chose.
func TestMachineConfigFilesRoundTrip(t *testing.T) {
	in := []onnode.File{
		{Path: "/etc/vipctl/cluster.yaml", Mode: 0o644, Data: []byte("apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\n")},
		{Path: "/etc/vipctl/scripts/check-http.sh", Mode: 0o755, Data: []byte("#!/bin/bash\nexit 0\n")},
		{Path: "/etc/kubernetes/manifests/pod.yaml", Mode: 0o644, Data: bytes.Repeat([]byte{0, 255, '%'}, 40)},
	}
	target, err := openshiftrelease.Parse("4.14")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := machineconfig.Build("50-vipctl-master", "master", target, in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := machineconfig.Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MachineConfigFiles(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d files, want %d", len(got), len(in))
	}
	for i, f := range got {
		if f.Path != in[i].Path || f.Mode != in[i].Mode || !bytes.Equal(f.Data, in[i].Data) {
			t.Errorf("file %d: %s %v %q, want %s %v %q", i, f.Path, f.Mode, f.Data, in[i].Path, in[i].Mode, in[i].Data)
		}
	}
}
