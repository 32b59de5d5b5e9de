package configcheck

import (
	"errors"
	"strings"
	"testing"
)

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
