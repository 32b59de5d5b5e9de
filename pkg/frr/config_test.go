package frr_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/frr"
)

// TestCheck: vtysh's dry run accepts a node's BGP config and names the
// line of a broken one.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := "frr defaults traditional\nrouter bgp 64513\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 timers 3 9\n address-family ipv4 unicast\n  network 203.0.113.193/32\n exit-address-family\nexit\n"
	if err := frr.Check(ctx, []byte(good), configcheck.Options{}); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	bad := strings.Replace(good, "remote-as", "remote-az", 1)
	if err := frr.Check(ctx, []byte(bad), configcheck.Options{}); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad config: err = %v", err)
	}
}
