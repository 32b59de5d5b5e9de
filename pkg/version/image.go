package version

import (
	"regexp"
	"strings"
)

// ImageRepository is where vipctl's image is published (make release,
// docs/image.md); users of disconnected clusters mirror it under the same
// path in their registry and set spec.images.
const ImageRepository = "quay.io/vipctl/vipctl"

// ImageTag is the tag of the image this binary belongs to: its version,
// with the characters a tag may not hold ('+' of a Go pseudo-version or
// "+dirty") made '-'. hack/build-image.sh maps the Makefile's VERSION the
// same way, so `make build image` and the defaults of that binary agree.
// Test binaries are not stamped and say "devel", which keeps goldens
// stable.
func ImageTag() string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, Get())
}

// Image is the full name of this binary's image.
func Image() string { return ImageRepository + ":" + ImageTag() }

// releasePattern is the shape of a release tag: vMAJOR.MINOR.PATCH, or a
// candidate for one (-alpha.N, -beta.N, -rc.N). Narrower than semver on
// purpose: `git describe` of a commit after a tag (v0.3.1-4-g7320a36) and
// Go's pseudo-versions (v0.0.0-20261123164212-7320a36b1c2d) are valid
// semver pre-releases, but no release was made of them.
var releasePattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(alpha|beta|rc)\.(0|[1-9][0-9]*))?$`)

// IsRelease tells whether v names a release, whose image `make release`
// built and a maintainer published (docs/image.md), rather than a
// development build ("devel", a commit, "-dirty", a pseudo-version) whose
// image exists only where it was built.
func IsRelease(v string) bool { return releasePattern.MatchString(v) }
