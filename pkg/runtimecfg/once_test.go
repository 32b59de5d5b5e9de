package runtimecfg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/render"
)

// TestOnceWithoutBootstrapNodes: rendered without --nodes, the init
// container still lets keepalived start (a config without instances, which
// the real keepalived accepts) and says why.
func TestOnceWithoutBootstrapNodes(t *testing.T) {
	target := Target{Root: nodeRoot(t)}
	_, err := Once(t.Context(), OnceOptions{Target: target, Config: "../../examples/compact-ipv4.yaml",
		BootstrapNodes: filepath.Join(t.TempDir(), "missing.yaml"), NodeName: "master-0"})
	if !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("err = %v, want ErrNoBootstrapNodes", err)
	}
	data, err := os.ReadFile(target.path(render.KeepalivedConfPath))
	if err != nil || !strings.Contains(string(data), "router_id master_0") || strings.Contains(string(data), "vrrp_instance") {
		t.Fatalf("placeholder keepalived.conf: %v\n%s", err, data)
	}
	if drain, _ := os.ReadFile(target.path(render.DrainFile)); string(drain) != "0\n" {
		t.Errorf("drain file %q", drain)
	}
}
