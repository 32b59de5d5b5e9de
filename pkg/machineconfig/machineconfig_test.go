package machineconfig

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes35 "github.com/coreos/ignition/v2/config/v3_5/types"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// sampleFiles covers what vipctl ships (a script, a manifest) and content
// that trips naive encoders.
func sampleFiles() []onnode.File {
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	return []onnode.File{
		{Path: "/etc/vipctl/scripts/check-http.sh", Mode: 0o755, Data: []byte("#!/bin/bash\nset -u\nexec 3<>\"/dev/tcp/127.0.0.1/$1\" || exit 1\n")},
		{Path: "/etc/kubernetes/manifests/vipctl-keepalived.yaml", Mode: 0o644, Data: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: vipctl-keepalived\n")},
		{Path: "/etc/vipctl/special.txt", Mode: 0o600, Data: []byte(
			"line one\nline  two\twith tab\r\n100% done, 50%20 not an escape\n" +
				"\"double\" 'single' `back` + plus & amp = eq ; semi # hash ? query / slash \\ backslash\n" +
				"ünïcødé ✓ 日本語 \U0001F680\x00nul\n")},
		{Path: "/etc/vipctl/plain", Mode: 0o644, Data: []byte("abcdefghijklmnopqrstuvwxyz-0123456789_(ok)")},
		{Path: "/etc/vipctl/empty", Mode: 0o644, Data: nil},
		{Path: "/var/lib/vipctl/all-bytes", Mode: 0o640, Data: allBytes},
	}
}

// TestRoundTrip takes the path a MachineConfig travels (YAML on disk, API
// object, Ignition on the node) and expects every file back byte for byte,
// in each spec a supported release gets.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target openshiftrelease.Release
		spec   string
	}{
		{openshiftrelease.Release{Major: 4, Minor: 14}, "3.4.0"},
		{openshiftrelease.Release{Major: 4, Minor: 19}, "3.5.0"},
	} {
		t.Run(tc.target.String(), func(t *testing.T) {
			t.Parallel()
			roundTrip(t, tc.target, tc.spec)
		})
	}
}

func roundTrip(t *testing.T, target openshiftrelease.Release, spec string) {
	in := sampleFiles()
	mc, err := Build("50-vipctl-master", "master", target, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(mc, target); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}

	var got mcfgv1.MachineConfig
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("marshalled MachineConfig does not decode strictly: %v\n%s", err, data)
	}
	if got.APIVersion != "machineconfiguration.openshift.io/v1" || got.Kind != "MachineConfig" {
		t.Errorf("apiVersion/kind %s/%s", got.APIVersion, got.Kind)
	}
	if got.Name != "50-vipctl-master" || got.Labels[RoleLabel] != "master" || len(got.Labels) != 1 {
		t.Errorf("metadata %+v, want name 50-vipctl-master and only the role label", got.ObjectMeta)
	}
	if err := Validate(&got, target); err != nil {
		t.Errorf("decoded MachineConfig: %v", err)
	}

	var version struct {
		Ignition struct{ Version string } `json:"ignition"`
	}
	if err := json.Unmarshal(got.Spec.Config.Raw, &version); err != nil || version.Ignition.Version != spec {
		t.Errorf("Ignition version %q (%v), want %s", version.Ignition.Version, err, spec)
	}
	// The newest parser reads every spec, as a newer MCO does.
	cfg, report, err := ign35.ParseCompatibleVersion(got.Spec.Config.Raw)
	if err != nil || len(report.Entries) > 0 {
		t.Fatalf("Ignition parse: %v\n%s", err, report)
	}
	byPath := map[string]igntypes35.File{}
	for _, f := range cfg.Storage.Files {
		byPath[f.Path] = f
	}
	if len(byPath) != len(in) {
		t.Errorf("%d files in the Ignition config, want %d", len(byPath), len(in))
	}
	encodings := map[string]bool{}
	for _, want := range in {
		f, ok := byPath[want.Path]
		if !ok {
			t.Errorf("%s missing from the Ignition config", want.Path)
			continue
		}
		if f.Mode == nil || fs.FileMode(*f.Mode) != want.Mode {
			t.Errorf("%s: mode %v, want %04o", want.Path, f.Mode, want.Mode)
		}
		if f.Overwrite == nil || !*f.Overwrite {
			t.Errorf("%s: overwrite must be true", want.Path)
		}
		if f.User.Name == nil || *f.User.Name != "root" || f.Group.Name == nil || *f.Group.Name != "root" {
			t.Errorf("%s: owner %+v:%+v, want root:root", want.Path, f.User, f.Group)
		}
		if f.Contents.Source == nil {
			t.Errorf("%s: no contents source", want.Path)
			continue
		}
		src := *f.Contents.Source
		encodings[src[:strings.IndexByte(src, ',')+1]] = true
		if content := decodeDataURL(t, src); !bytes.Equal(content, want.Data) {
			t.Errorf("%s: content %q, want %q", want.Path, content, want.Data)
		}
	}
	// The sample is chosen so that both encodings are used and checked.
	if !encodings["data:,"] || !encodings["data:;base64,"] {
		t.Errorf("encodings used %v, want both data:, and data:;base64,", encodings)
	}
}

// decodeDataURL reads the two RFC 2397 forms dataURL writes. Ignition's
// validator has already run the same URLs through its own decoder.
func decodeDataURL(t *testing.T, s string) []byte {
	t.Helper()
	if rest, ok := strings.CutPrefix(s, "data:;base64,"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return b
	}
	if rest, ok := strings.CutPrefix(s, "data:,"); ok {
		for i := 0; i < len(rest); i++ {
			if c := rest[i]; c != '%' && !unreserved(c) {
				t.Fatalf("%q: reserved character %q left unescaped", s, c)
			}
		}
		b, err := url.PathUnescape(rest)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return []byte(b)
	}
	t.Fatalf("%q is not a data URL this package writes", s)
	return nil
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	ok := onnode.File{Path: "/etc/vipctl/ok", Mode: 0o644, Data: []byte("x")}
	tests := []struct {
		name   string
		mc     string
		role   string
		target openshiftrelease.Release // zero: the oldest supported
		files  []onnode.File
		want   []string // each must appear in the error
	}{
		{
			name:  "relative path",
			files: []onnode.File{ok, {Path: "etc/vipctl/cluster.yaml", Mode: 0o644}},
			want:  []string{`file "etc/vipctl/cluster.yaml": path must be absolute`},
		},
		{
			name:  "duplicate path",
			files: []onnode.File{ok, {Path: "/etc/vipctl/dup", Mode: 0o644}, {Path: "/etc/vipctl/dup", Mode: 0o600}},
			want:  []string{`file "/etc/vipctl/dup": listed more than once`},
		},
		{
			name:  "unclean path",
			files: []onnode.File{{Path: "/etc/vipctl/../../usr/bin/x", Mode: 0o755}},
			want:  []string{`file "/etc/vipctl/../../usr/bin/x": path must be clean ("/usr/bin/x")`},
		},
		{
			name:  "read-only part of the OS",
			files: []onnode.File{{Path: "/usr/local/bin/vipctl", Mode: 0o755}},
			want:  []string{`file "/usr/local/bin/vipctl": the Machine Config Operator only writes below /etc/ and /var/`},
		},
		{
			name:  "setuid",
			files: []onnode.File{{Path: "/etc/vipctl/suid", Mode: 0o755 | fs.ModeSetuid}},
			want:  []string{`file "/etc/vipctl/suid": mode ` + (0o755 | fs.ModeSetuid).String() + " has bits beyond permissions"},
		},
		{
			name:  "every problem at once",
			files: []onnode.File{{Path: "rel", Mode: 0o644}, ok, ok},
			want:  []string{`file "rel": path must be absolute`, `file "/etc/vipctl/ok": listed more than once`},
		},
		{
			name:   "release without a known spec",
			target: openshiftrelease.Release{Major: 4, Minor: 12},
			files:  []onnode.File{ok},
			want:   []string{"OpenShift 4.12: not a supported release"},
		},
		{
			name: "bad name",
			mc:   "50_vipctl",
			want: []string{`name "50_vipctl": a lowercase RFC 1123 subdomain`},
		},
		{
			name: "empty role",
			role: "-",
			want: []string{"role must not be empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name, role := tt.mc, tt.role
			if name == "" {
				name = "50-vipctl-worker"
			}
			switch role {
			case "":
				role = "worker"
			case "-":
				role = ""
			}
			target := tt.target
			if target == (openshiftrelease.Release{}) {
				target = openshiftrelease.Default()
			}
			mc, err := Build(name, role, target, tt.files)
			if err == nil {
				t.Fatalf("Build accepted it: %+v", mc)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestValidateJudgesLikeTheMCO checks that Ignition's findings, warnings
// included, come back as errors, judged by the parser of the target's MCO.
func TestValidateJudgesLikeTheMCO(t *testing.T) {
	t.Parallel()
	r418 := openshiftrelease.Release{Major: 4, Minor: 18}
	r419 := openshiftrelease.Release{Major: 4, Minor: 19}
	tests := map[string]struct {
		raw    string
		target openshiftrelease.Release
		want   string // empty: accepted
	}{
		"warning: special mode bits": {
			raw:    `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/x","mode":2541,"contents":{"source":"data:,x"}}]}}`,
			target: r419,
			want:   "setuid/setgid/sticky",
		},
		"error: relative path": {
			raw:    `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/x","contents":{"source":"data:,x"}}]}}`,
			target: r419,
			want:   "absolute",
		},
		"error: bad data URL": {
			raw:    `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,a b"}}]}}`,
			target: r418,
			want:   "invalid",
		},
		// What issue 19 was about: 4.14 to 4.18 refuse 3.5.0.
		"a spec newer than the release parses": {
			raw:    `{"ignition":{"version":"3.5.0"}}`,
			target: r418,
			want:   "OpenShift 4.18 (Ignition 3.4.0): unsupported config version",
		},
		"an older spec is translated up, as the MCO does": {
			raw:    `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/x","mode":420,"contents":{"source":"data:,x"}}]}}`,
			target: r419,
		},
		"a release without a known spec": {
			raw:    `{"ignition":{"version":"3.2.0"}}`,
			target: openshiftrelease.Release{Major: 4, Minor: 12},
			want:   "OpenShift 4.12: not a supported release",
		},
		"not JSON": {
			raw:    `{"ignition":`,
			target: r419,
			want:   "OpenShift 4.19 (Ignition 3.5.0)",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mc := &mcfgv1.MachineConfig{Spec: mcfgv1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(tt.raw)}}}
			mc.Name = "50-test"
			err := Validate(mc, tt.target)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate refused it: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatal("Validate accepted it")
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if err := Validate(&mcfgv1.MachineConfig{}, r419); err == nil {
		t.Error("Validate accepted a MachineConfig without an Ignition config")
	}
}

// TestEverySupportedReleaseHasItsSpec: a release added to the table
// without a way to write and judge its spec would fail every render.
func TestEverySupportedReleaseHasItsSpec(t *testing.T) {
	t.Parallel()
	for _, r := range openshiftrelease.Supported() {
		if _, err := ignitionSpec(r); err != nil {
			t.Error(err)
		}
	}
}

// TestSpecialModeBits pins the MCO's rule apart from Ignition's own
// warning, which says the same today but is not what refuses the config.
func TestSpecialModeBits(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"storage":{"files":[{"path":"/etc/a","mode":493},{"path":"/etc/b"}]}}`: "",
		`{"storage":{"files":[{"path":"/etc/a","mode":2541}]}}`:                  "file /etc/a: mode 04755: the Machine Config Operator refuses modes beyond 0777",
		`{"storage":{"files":[{"path":"/etc/a","mode":932}]}}`:                   "file /etc/a: mode 01644",
		`{"storage":{"files":[{"path":"/etc/a","mode":1517}]}}`:                  "file /etc/a: mode 02755",
	} {
		err := SpecialModeBits([]byte(raw))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want %q", raw, err, want)
		}
	}
}

func TestDataURL(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":                                 "data:,",
		"plain-text_1.0":                   "data:,plain-text_1.0",
		"a b\n":                            "data:,a%20b%0A",
		"100%+x":                           "data:,100%25%2Bx",
		"\xff\xfe\xfd\xfc":                 "data:,%FF%FE%FD%FC", // 12 bytes beat 15
		"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8": "data:;base64,//79/Pv6+fg=",
		"ü":                                "data:,%C3%BC",
		"\x00\x01\x02\x03\x04\x05\x06!":    "data:;base64,AAECAwQFBiE=",
	}
	for in, want := range tests {
		if got := dataURL([]byte(in)); got != want {
			t.Errorf("dataURL(%q) = %q, want %q", in, got, want)
		}
	}
}
