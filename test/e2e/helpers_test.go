package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/test/netlab"
)

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// execJSON runs a vipctl command with -o json on h, decodes its stdout
// into v (when it printed anything) and returns its exit status and
// stderr; a command that could not run at all fails the test.
func execJSON(t *testing.T, h *netlab.Host, v any, argv ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS}, argv...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (exit %d):\n%s%s", strings.Join(argv[1:], " "), code, out.String(), errOut.String())
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), v); err != nil {
			t.Fatalf("%s: %v:\n%s", strings.Join(argv[1:], " "), err, out.String())
		}
	}
	return code, errOut.String()
}
