package manifests

import (
	"bytes"
	"testing"

	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestClusterFileChangeRestartsKeepalived: a node disruption policy lets
// the Machine Config Operator lay a new cluster file without a reboot,
// and the keepalived pod reads that file only when it starts. An edit the
// pod spec itself does not show (the API VIP) must still change the
// keepalived manifest, so that the kubelet replaces the pod; haproxy's
// pod, which never reads the file, stays as it is.
func TestClusterFileChangeRestartsKeepalived(t *testing.T) {
	t.Parallel()
	before := loadExample(t, "compact-ipv4.yaml")
	after := loadExample(t, "compact-ipv4.yaml")
	after.Spec.API.VIPs = []string{"198.51.100.15"}
	if after.Spec.API.VIPs[0] == before.Spec.API.VIPs[0] {
		t.Fatalf("the edit changes nothing: %v", before.Spec.API.VIPs)
	}
	manifest := func(t *testing.T, files []onnode.File, pod string) []byte {
		t.Helper()
		for _, f := range files {
			if f.Path == StaticPodPath(pod) {
				return f.Data
			}
		}
		t.Fatalf("no %s", StaticPodPath(pod))
		return nil
	}
	old, err := StaticPodFiles(before, roleMaster)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := StaticPodFiles(after, roleMaster)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pod         string
		wantChanged bool
	}{
		{onnode.KeepalivedPodName, true},
		{onnode.HaproxyPodName, false},
	}
	for _, tc := range tests {
		t.Run(tc.pod, func(t *testing.T) {
			if got := !bytes.Equal(manifest(t, old, tc.pod), manifest(t, changed, tc.pod)); got != tc.wantChanged {
				t.Errorf("manifest changed with the cluster file: %v, want %v", got, tc.wantChanged)
			}
		})
	}
}
