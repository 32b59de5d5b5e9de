package configcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestKeepalivedJudge runs the real keepalived: it must accept a good
// config and reject each way of breaking one, including the script
// problems keepalived 2.2.7's config test stays silent about.
func TestKeepalivedJudge(t *testing.T) {
	lab := netlab.New(t)
	node := lab.AddHost("n", netlab.HostOpts{Addrs: []string{"198.51.100.11/24"}})
	ctx := context.Background()
	good := scriptRoot(t, 0o755, 0o755)
	if err := Keepalived(ctx, []byte(goodConf), Options{Netns: node.NS, Root: good}); err != nil {
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
		err := Keepalived(ctx, []byte(tc.conf), Options{Netns: node.NS, Root: tc.root})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

// TestFRRJudge: vtysh's dry run accepts a node's BGP config and names the
// line of a broken one.
func TestFRRJudge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := "frr defaults traditional\nrouter bgp 64513\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 timers 3 9\n address-family ipv4 unicast\n  network 203.0.113.193/32\n exit-address-family\nexit\n"
	if err := FRR(ctx, []byte(good), Options{}); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	bad := strings.Replace(good, "remote-as", "remote-az", 1)
	if err := FRR(ctx, []byte(bad), Options{}); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad config: err = %v", err)
	}
}

// TestDiagnoseIsBoundedAndRedacted: what a daemon prints reaches a log
// line and a ConfigKept Event; an echoed config line must not carry a
// password there, nor megabytes or terminal escapes.
func TestDiagnoseIsBoundedAndRedacted(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	out.WriteString("[ALERT] parsing [haproxy.cfg:12] : 'user admin password s3cr3t-hash'\n")
	out.WriteString("bad \x1b[31mescape\n")
	out.WriteString(strings.Repeat("x", 5000) + "\n")
	for i := 0; i < 1000; i++ {
		out.WriteString("more noise\n")
	}
	got := Diagnose([]byte(out.String()), errors.New("exit status 1"))
	if strings.Contains(got, "s3cr3t") {
		t.Errorf("the password reached the message: %q", got)
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("a control character reached the message: %q", got)
	}
	if len(got) > 3000 {
		t.Errorf("message is %d bytes, want it bounded", len(got))
	}
	for _, want := range []string{"password <redacted>", "… (993 more lines)", "(exit status 1)"} {
		if !strings.Contains(got, want) {
			t.Errorf("message lacks %q: %q", want, got)
		}
	}
}
