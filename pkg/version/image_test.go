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

// TestIsRelease: only the tags a maintainer makes (docs/image.md,
// "Making a release") are releases; every shape a development build's
// version takes is not, also those that are valid semver.
func TestIsRelease(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"v0.5.0":         true,
		"v1.12.3":        true,
		"v0.5.0-rc.1":    true,
		"v0.5.0-alpha.0": true,
		"v0.5.0-beta.2":  true,
		"devel":          false,
		"e6f8dbd":        false,
		"e6f8dbd-dirty":  false,
		"v0.5.0-dirty":   false,
		// git describe of a commit after the tag, with and without changes
		"v0.5.0-4-ge6f8dbd":       false,
		"v0.5.0-4-ge6f8dbd-dirty": false,
		"v0.5.0-rc.1-4-ge6f8dbd":  false,
		// Go pseudo-versions (go install ...@commit), and with +dirty mapped
		"v0.0.0-20261123164212-7320a36b1c2d":       false,
		"v0.5.1-0.20261123164212-7320a36b1c2d":     false,
		"v0.0.0-20261123164212-7320a36b1c2d+dirty": false,
		"0.5.0":          false,
		"v0.5":           false,
		"v00.5.0":        false,
		"v0.5.0-rc":      false,
		"v0.5.0+build.1": false,
		"":               false,
	} {
		if got := IsRelease(v); got != want {
			t.Errorf("IsRelease(%q) = %v, want %v", v, got, want)
		}
	}
}
