package openshiftrelease

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := map[string]string{ // input -> error; empty: accepted
		"4.14":   "",
		"4.22":   "",
		"4.12":   "OpenShift 4.12 is not supported; supported: 4.14, 4.15, 4.16, 4.17, 4.18, 4.19, 4.20, 4.21, 4.22",
		"4.23":   "OpenShift 4.23 is newer than this vipctl knows: target 4.22, the newest it supports, whose MachineConfigs later releases accept too",
		"5.0":    "OpenShift 5.0 is newer than this vipctl knows: target 4.22, the newest it supports, whose MachineConfigs later releases accept too",
		"3.11":   "OpenShift 3.11 is not supported; supported: 4.14, 4.15, 4.16, 4.17, 4.18, 4.19, 4.20, 4.21, 4.22",
		"4.16.3": "want major.minor without a patch level, such as 4.14",
		"4.016":  "not an OpenShift release: want major.minor, such as 4.14",
		"4":      "not an OpenShift release: want major.minor, such as 4.14",
		"":       "not an OpenShift release: want major.minor, such as 4.14",
		"v4.16":  "not an OpenShift release: want major.minor, such as 4.14",
		"4.x":    "not an OpenShift release: want major.minor, such as 4.14",
		"+4.16":  "not an OpenShift release: want major.minor, such as 4.14",
	}
	for in, want := range tests {
		r, err := Parse(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("Parse(%q): %v", in, err)
		case want == "" && r.String() != in:
			t.Errorf("Parse(%q) = %s", in, r)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("Parse(%q) error %v, want %s", in, err, want)
		}
	}
}

func TestFromVersion(t *testing.T) {
	t.Parallel()
	tests := map[string]string{ // ClusterVersion's version -> minor release; empty: refused
		"4.16.12":                        "4.16",
		"4.19.0-rc.2":                    "4.19",
		"4.17.0-0.okd-2024-10-20-023245": "4.17",
		"4.12.0":                         "4.12",
		"5.0.1":                          "5.0",
		"4.16":                           "4.16",
		"4.16x":                          "",
		"latest":                         "",
	}
	for in, want := range tests {
		r, err := FromVersion(in)
		switch {
		case want == "" && err == nil:
			t.Errorf("FromVersion(%q) = %s, want an error", in, r)
		case want != "" && (err != nil || r.String() != want):
			t.Errorf("FromVersion(%q) = %s, %v; want %s", in, r, err, want)
		}
	}
}

// TestTable guards the properties the rest of vipctl relies on: oldest
// first, no gaps, and a spec that never goes down with a newer release, so
// that output for the oldest is parsed by every one.
func TestTable(t *testing.T) {
	t.Parallel()
	releases := Supported()
	if Default() != releases[0] {
		t.Errorf("Default() = %s, want the oldest supported, %s", Default(), releases[0])
	}
	if !slices.IsSortedFunc(releases, func(a, b Release) int {
		switch {
		case a.Less(b):
			return -1
		case b.Less(a):
			return 1
		}
		return 0
	}) {
		t.Errorf("not oldest first: %v", releases)
	}
	prev := ""
	for i, r := range releases {
		spec, ok := r.IgnitionSpec()
		if !ok {
			t.Fatalf("%s has no spec", r)
		}
		if spec < prev {
			t.Errorf("%s parses %s, older than %s before it", r, spec, prev)
		}
		prev = spec
		if i > 0 && r != (Release{releases[i-1].Major, releases[i-1].Minor + 1}) && r != (Release{releases[i-1].Major + 1, 0}) {
			t.Errorf("%s follows %s: a release in between is missing", r, releases[i-1])
		}
	}
	if _, ok := (Release{4, 13}).IgnitionSpec(); ok {
		t.Error("4.13 has a spec but is not supported")
	}
}

func TestHasNodeDisruptionPolicies(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{"4.14": false, "4.16": false, "4.17": true, "4.22": true}
	for in, want := range tests {
		r, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.HasNodeDisruptionPolicies(); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}
