// Package version reports the build's version, set at link time by the
// Makefile and read from the module's build info otherwise.
package version

import "runtime/debug"

// Version is overridden with -ldflags "-X .../pkg/version.Version=v1.2.3".
var Version = ""

// Get returns the version string of this binary.
func Get() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
