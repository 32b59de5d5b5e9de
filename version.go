// Package vipctl is the repository's root. It holds one thing for the
// packages under it: the file VERSION, which only a package in this
// directory can embed.
package vipctl

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Release is the release this source tree is, or the last one it follows:
// the file VERSION, which the Makefile and hack/release.sh read too
// (hack/releaseversion names a build from it). v0.0.0 before the first.
func Release() string { return strings.TrimSpace(versionFile) }
