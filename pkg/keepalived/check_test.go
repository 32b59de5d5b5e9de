package keepalived_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/test/netlab"
)

const goodConf = `global_defs {
    enable_script_security
    script_user keepalived_script
}

vrrp_script chk {
    script "/scripts/check.sh 9444 /readyz"
    interval 1
    weight 0
}

vrrp_instance api_v4 {
    state BACKUP
    interface br-ex
    virtual_router_id 14
    priority 100
    unicast_src_ip 198.51.100.11
    unicast_peer {
        198.51.100.12
    }
    virtual_ipaddress {
        198.51.100.5/32 dev br-ex
    }
    track_script {
        chk
    }
}
`

// scriptRoot lays out /scripts/check.sh under a fresh root with the given
// modes.
func scriptRoot(t *testing.T, dirMode, fileMode os.FileMode) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "scripts")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "check.sh"), fileMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCheck runs the real keepalived: it must accept a good
// config and reject each way of breaking one, including the script
// problems keepalived 2.2.7's config test stays silent about.
func TestCheck(t *testing.T) {
	lab := netlab.New(t)
	node := lab.AddHost("n", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	ctx := context.Background()
	good := scriptRoot(t, 0o755, 0o755)
	if err := keepalived.Check(ctx, []byte(goodConf), configcheck.Options{Netns: node.NS, Root: good}); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	cases := []struct {
		name string
		conf string
		root string
		want string
	}{
		{"unknown keyword", strings.Replace(goodConf, "priority 100", "priority 100\n    bogus_keyword 1", 1), good, "Unknown keyword 'bogus_keyword'"},
		{"missing interface", strings.ReplaceAll(goodConf, "br-ex", "eth9"), good, "keepalived --config-test"},
		{"no VIP", strings.Replace(goodConf, "        198.51.100.5/32 dev br-ex\n", "", 1), good, "No VIP specified"},
		{"missing script", goodConf, t.TempDir(), "script /scripts/check.sh: stat"},
		{"script not executable", goodConf, scriptRoot(t, 0o755, 0o644), "not executable"},
		{"world-writable script dir", goodConf, scriptRoot(t, 0o777, 0o755), "is writable by group or others"},
		{"group-writable script", goodConf, scriptRoot(t, 0o755, 0o775), "writable by group or others (mode -rwxrwxr-x)"},
	}
	for _, tc := range cases {
		err := keepalived.Check(ctx, []byte(tc.conf), configcheck.Options{Netns: node.NS, Root: tc.root})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}
