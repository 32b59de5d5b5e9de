package configcheck

import (
	"context"
	"errors"
	"strings"
	"testing"
)

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
