package version

import "strings"

// ImageRepository is where vipctl's image (make image) is published; users
// of disconnected clusters mirror it and set spec.images.
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
