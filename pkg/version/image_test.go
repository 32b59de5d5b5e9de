package version

import "testing"

// The tag must be valid for a registry ([A-Za-z0-9_][A-Za-z0-9_.-]*) and
// match what hack/build-image.sh names the image it builds.
func TestImageTag(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v0.3.1", "v0.3.1"},
		{"7320a36-dirty", "7320a36-dirty"},
		{"v0.3.1-4-g7320a36", "v0.3.1-4-g7320a36"},
		{"v0.0.0-20261123164212-7320a36b1c2d+dirty", "v0.0.0-20261123164212-7320a36b1c2d-dirty"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			old := Version
			Version = tc.version
			t.Cleanup(func() { Version = old })
			if got := ImageTag(); got != tc.want {
				t.Errorf("ImageTag() = %q, want %q", got, tc.want)
			}
			if got, want := Image(), "quay.io/vipctl/vipctl:"+tc.want; got != want {
				t.Errorf("Image() = %q, want %q", got, want)
			}
		})
	}
}
