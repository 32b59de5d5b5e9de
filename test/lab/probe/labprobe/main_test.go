package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadDurations: each bad duration is refused naming its flag,
// and no output file is left behind.
func TestRunRefusesBadDurations(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"-drain=-1s", "-drain -1s"},
		{"-stall-every=0s", "-stall-every 0s"},
		{"-stall-threshold=-5ms", "-stall-threshold -5ms"},
	} {
		out := filepath.Join(t.TempDir(), "records.json")
		err := run([]string{"echo", "-out", out, "-listen", "127.0.0.1:0", tc.flag})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %q", tc.flag, err, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output file written before the refusal (%v)", tc.flag, err)
		}
	}
}
