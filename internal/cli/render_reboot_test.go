package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/bundle"
)

// TestRenderNodeDisruptionPolicy: for 4.17 and later render writes the
// node disruption policy and says nothing of reboots; before 4.17 it
// writes none and warns that every MachineConfig change reboots the
// nodes (the warning's text is pinned by pkg/bundle's golden).
func TestRenderNodeDisruptionPolicy(t *testing.T) {
	t.Parallel()
	const warned = "warning: OpenShift 4.16 applies no node disruption policies on its default feature set"
	tests := []struct {
		release    string
		wantPolicy bool
	}{
		{"4.14", false},
		{"4.16", false},
		{"4.17", true},
		{"4.22", true},
	}
	for _, tc := range tests {
		t.Run(tc.release, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			r := run(t, "render", "-f", repo("examples/compact-ipv4.yaml"), "--out-dir", out, "--openshift-release", tc.release)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			_, err := os.Stat(filepath.Join(out, bundle.DisruptionPolicyPath))
			if gotPolicy := err == nil; gotPolicy != tc.wantPolicy {
				t.Errorf("%s written: %v, want %v", bundle.DisruptionPolicyPath, gotPolicy, tc.wantPolicy)
			}
			gotWarning := strings.Contains(r.stderr, "applies no node disruption policies")
			if gotWarning == tc.wantPolicy {
				t.Errorf("reboot warning: %v, want %v; stderr:\n%s", gotWarning, !tc.wantPolicy, r.stderr)
			}
			if tc.release == "4.16" && !strings.Contains(r.stderr, warned) {
				t.Errorf("4.16's warning does not name its TechPreview: %s", r.stderr)
			}
		})
	}
}
