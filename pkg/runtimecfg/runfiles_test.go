package runtimecfg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestInitRunFilesEndsStepDowns: the init container and a starting
// sidecar end the step-downs a previous pod left, whose holds ended with
// it, before keepalived reads them.
func TestInitRunFilesEndsStepDowns(t *testing.T) {
	tg := host.Target{Root: t.TempDir()}
	f := tg.Path(onnode.UnheardFile("pool_general_0_v6"))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := InitRunFiles(tg, &v1alpha1.ClusterVIPs{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("after the start the file says %q, want 0", b)
	}
}
