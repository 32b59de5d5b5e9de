// Package openshiftrelease knows which Ignition spec the Machine Config
// Operator of each OpenShift release parses. The MCO reads every
// MachineConfig with Ignition's ParseCompatibleVersion of the newest spec
// it knows: older specs are translated up, a newer one is refused
// ("unsupported config version") and the pool degrades. So a MachineConfig
// must carry a spec no newer than its cluster's MCO knows.
//
// It is its own package because the config types (to validate and default
// the target release), the MachineConfig builder and `vipctl update` (to
// compare with the live cluster) all need the same table.
package openshiftrelease

import (
	"fmt"
	"strconv"
	"strings"
)

// Ignition spec versions a supported release parses.
const (
	Ignition34 = "3.4.0"
	Ignition35 = "3.5.0"
)

// Release is an OpenShift minor release such as 4.16: the MCO's parser
// never changes within one.
type Release struct {
	Major, Minor int
}

func (r Release) String() string { return fmt.Sprintf("%d.%d", r.Major, r.Minor) }

// Less orders releases.
func (r Release) Less(o Release) bool {
	if r.Major != o.Major {
		return r.Major < o.Major
	}
	return r.Minor < o.Minor
}

// supported lists every release vipctl renders for, oldest first, with
// the spec its MCO parses: the ign3 package imported by
// pkg/controller/common/helpers.go on the MCO's release-4.y branch, and the
// same spec as coreos/butane's openshift v4.y.0 variant
// (config/openshift/v4_y/translate.go). docs/render.md has the table.
//
// Append, never remove: the release a config names is validated wherever
// the config is read, the sidecars' ConfigMap and the nodes' own copy
// included, so dropping one here would make those configs invalid. When
// the default should move past a release Red Hat no longer supports, give
// Default its own value instead.
var supported = []struct {
	release Release
	spec    string
}{
	{Release{4, 14}, Ignition34},
	{Release{4, 15}, Ignition34},
	{Release{4, 16}, Ignition34},
	{Release{4, 17}, Ignition34},
	{Release{4, 18}, Ignition34},
	{Release{4, 19}, Ignition35},
	{Release{4, 20}, Ignition35},
	{Release{4, 21}, Ignition35},
	{Release{4, 22}, Ignition35},
}

// Default is the target of a config that names none: the oldest supported
// release, since newer MCOs translate older specs up and so accept what is
// rendered for it.
func Default() Release { return supported[0].release }

// Supported lists every supported release, oldest first.
func Supported() []Release {
	out := make([]Release, len(supported))
	for i, s := range supported {
		out[i] = s.release
	}
	return out
}

// IgnitionSpec is the newest Ignition spec version r's MCO parses; false
// for a release vipctl does not support.
func (r Release) IgnitionSpec() (string, bool) {
	for _, s := range supported {
		if s.release == r {
			return s.spec, true
		}
	}
	return "", false
}

// Parse reads a supported release written as major.minor ("4.16"). A patch
// level is refused rather than dropped: the target names the oldest minor
// release the MachineConfigs must work on, and "4.16.3" reads as if it
// were more precise than that.
func Parse(s string) (Release, error) {
	r, rest, err := parseMinor(s)
	if err != nil {
		return Release{}, err
	}
	if rest != "" {
		return Release{}, fmt.Errorf("want major.minor without a patch level, such as %s", Default())
	}
	if _, ok := r.IgnitionSpec(); !ok {
		if newest := Newest(); newest.Less(r) {
			// The target is the oldest release the MachineConfigs must
			// work on, and a newer MCO translates older specs up.
			return Release{}, fmt.Errorf("OpenShift %s is newer than this vipctl knows: target %s, the newest it supports, whose MachineConfigs later releases accept too", r, newest)
		}
		return Release{}, fmt.Errorf("OpenShift %s is not supported; supported: %s", r, supportedList())
	}
	return r, nil
}

// Newest is the newest supported release.
func Newest() Release { return supported[len(supported)-1].release }

// FromVersion reads the minor release of a full version as ClusterVersion
// reports it ("4.16.12", "4.19.0-rc.2", "4.17.0-0.okd-2024-10-20-023245"),
// supported or not.
func FromVersion(v string) (Release, error) {
	r, rest, err := parseMinor(v)
	if err != nil {
		return Release{}, fmt.Errorf("%q: %w", v, err)
	}
	if rest != "" && rest[0] != '.' && rest[0] != '-' {
		return Release{}, fmt.Errorf("%q is not an OpenShift version", v)
	}
	return r, nil
}

// parseMinor reads the leading major.minor of s and returns what follows.
func parseMinor(s string) (Release, string, error) {
	bad := fmt.Errorf("not an OpenShift release: want major.minor, such as %s", Default())
	major, rest, ok := strings.Cut(s, ".")
	if !ok {
		return Release{}, "", bad
	}
	end := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' })
	if end < 0 {
		end = len(rest)
	}
	minor := rest[:end]
	var r Release
	var err error
	if r.Major, err = number(major); err != nil {
		return Release{}, "", bad
	}
	if r.Minor, err = number(minor); err != nil {
		return Release{}, "", bad
	}
	return r, rest[end:], nil
}

// number is strconv.Atoi without signs or leading zeros, so every release
// has one spelling.
func number(s string) (int, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.IndexFunc(s, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return strconv.Atoi(s)
}

func supportedList() string {
	names := make([]string, len(supported))
	for i, s := range supported {
		names[i] = s.release.String()
	}
	return strings.Join(names, ", ")
}
