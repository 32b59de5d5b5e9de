package haproxy_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/haproxy"
)

// TestCheck: the real haproxy accepts a good config and names what is
// wrong with a bad one.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := "global\ndefaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nfrontend api\n    bind 127.0.0.1:9445\n    default_backend api\nbackend api\n    server m0 198.51.100.11:6443 check\n"
	if err := haproxy.Check(ctx, []byte(good), configcheck.Options{}); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	bad := strings.Replace(good, "default_backend api", "default_backend nowhere", 1)
	if err := haproxy.Check(ctx, []byte(bad), configcheck.Options{}); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("bad config: err = %v", err)
	}
}

// TestWrite: the template renders from Config alone, and the real
// haproxy accepts what it renders.
func TestWrite(t *testing.T) {
	t.Parallel()
	c := &haproxy.Config{
		Node: "m0", Cluster: "lab", StatsSocket: "/tmp/vipctl-test-stats.sock", StatsPort: 29443,
		HealthBinds: []string{"127.0.0.1:29444"}, APIBackend: "api", LiveBackend: "api_live",
		APIServers: []string{"m0"}, Quorum: 1,
		Frontends: []haproxy.Frontend{{Name: "api", Binds: []string{"127.0.0.1:29445"}, Check: "/readyz", Live: "/livez",
			Servers: []haproxy.Server{{Name: "m0", Address: "198.51.100.11:6443"}}}},
	}
	var b bytes.Buffer
	if err := haproxy.Write(&b, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"198.51.100.11:6443", "for node m0 of cluster lab"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("haproxy.cfg lacks %q:\n%s", want, b.String())
		}
	}
	if err := haproxy.Check(context.Background(), b.Bytes(), configcheck.Options{}); err != nil {
		t.Errorf("rendered config refused: %v\n%s", err, b.String())
	}
}
