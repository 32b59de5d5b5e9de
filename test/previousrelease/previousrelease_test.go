package previousrelease

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vipctl/vipctl/hack/releases"
)

// TestFind: the newest recorded release; the fallback only while the
// record does not exist; a record without a release is an error.
func TestFind(t *testing.T) {
	const c1, c2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name string
		file *string
		want releases.Release
		err  string
	}{
		{name: "no record yet", want: Fallback},
		{name: "the newest of two", file: ptr("v0.1.0 " + c1 + "\nv0.2.0 " + c2 + "\n"), want: releases.Release{Version: "v0.2.0", Commit: c2}},
		{name: "a record without a release", file: ptr("# none yet\n"), err: "hack/releases.txt records no release"},
		{name: "a bad record", file: ptr("v0.1.0 abc\n"), err: `hack/releases.txt:1: v0.1.0: "abc" is not a full commit hash (40 hex digits)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.file != nil {
				if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, releases.ReleasesFile), []byte(*tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Find(root)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Find = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
