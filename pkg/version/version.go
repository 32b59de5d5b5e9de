// Package version reports the build's version, set at link time by the
// Makefile and read from the module's build info otherwise.
package version

import (
	"runtime"
	"runtime/debug"

	"github.com/vipctl/vipctl"
)

// Version is overridden with -ldflags "-X .../pkg/version.Version=v1.2.3".
var Version = ""

// Release is the release this binary's source is or follows (the
// repository's file VERSION, embedded): Get() itself for a release, the
// release a development build's commits come after otherwise, also when
// the binary is not stamped (go test, go build). What a release's files
// are named by, such as the tag-pinned runbook URLs of the alerts.
func Release() string { return vipctl.Release() }

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

// Info is what `vipctl version` prints and `vipctl diagnose` records, so
// a support bundle names the build the way the user's terminal does.
type Info struct {
	Version string `json:"version"`
	// Release is false for a development build, whose image no registry
	// publishes (hack/release.sh refuses to ship one as a release).
	Release   bool   `json:"release"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Image is what spec.images defaults to when this binary renders.
	Image string `json:"image"`
}

// Current describes this binary.
func Current() Info {
	return Info{
		Version: Get(), Release: IsRelease(Get()),
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Image: Image(),
	}
}
