// Package machineconfig delivers files to OpenShift nodes: it wraps them in
// an Ignition config inside a MachineConfig, which the Machine Config
// Operator lays on every node of a pool, at install time and after.
package machineconfig

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	ign34 "github.com/coreos/ignition/v2/config/v3_4"
	igntypes "github.com/coreos/ignition/v2/config/v3_4/types"
	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	translate35 "github.com/coreos/ignition/v2/config/v3_5/translate"
	"github.com/coreos/vcontext/report"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// RoleLabel selects the MachineConfigPool (master, worker, ...) a
// MachineConfig belongs to.
const RoleLabel = "machineconfiguration.openshift.io/role"

// The MCO only writes below these: the rest of an RHCOS root is read-only,
// and a file elsewhere degrades the whole pool when the node applies it.
var writableRoots = []string{"/etc/", "/var/"}

// specs are the Ignition specs a supported release parses.
//
// The config is built once, in igntypes: the oldest spec a supported
// release parses. write reaches every other spec with Ignition's own
// translators, the steps a newer MCO's ParseCompatibleVersion takes itself
// on an older config, so each target gets what its MCO would have made of
// the oldest one, in that spec's types, with no version string edited.
//
// parse is what an MCO that knows the spec runs on every MachineConfig
// (IgnParseWrapper in its pkg/controller/common/helpers.go): Ignition's
// ParseCompatibleVersion of that spec, whose validator runs on the way.
var specs = map[string]struct {
	write func(igntypes.Config) any
	parse func([]byte) (report.Report, error)
}{
	openshiftrelease.Ignition34: {
		write: func(c igntypes.Config) any { return c },
		parse: func(raw []byte) (report.Report, error) {
			_, r, err := ign34.ParseCompatibleVersion(raw)
			return r, err
		},
	},
	openshiftrelease.Ignition35: {
		write: func(c igntypes.Config) any { return translate35.Translate(c) },
		parse: func(raw []byte) (report.Report, error) {
			_, r, err := ign35.ParseCompatibleVersion(raw)
			return r, err
		},
	},
}

// ignitionSpec is the spec target's MCO parses, or an error for a release
// without one (the config's validation refuses those first).
func ignitionSpec(target openshiftrelease.Release) (string, error) {
	spec, ok := target.IgnitionSpec()
	if _, known := specs[spec]; !ok || !known {
		return "", fmt.Errorf("OpenShift %s: not a supported release", target)
	}
	return spec, nil
}

// Build wraps files in a MachineConfig for one role (master, worker) in
// the Ignition spec target's Machine Config Operator parses, which every
// later release parses too.
func Build(name, role string, target openshiftrelease.Release, files []onnode.File) (*mcfgv1.MachineConfig, error) {
	var errs []error
	spec, err := ignitionSpec(target)
	if err != nil {
		errs = append(errs, err)
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, fmt.Errorf("name %q: %s", name, msg))
	}
	if role == "" {
		errs = append(errs, errors.New("role must not be empty"))
	}
	for _, msg := range validation.IsValidLabelValue(role) {
		errs = append(errs, fmt.Errorf("role %q: %s", role, msg))
	}
	seen := map[string]bool{}
	ignFiles := make([]igntypes.File, 0, len(files))
	for _, f := range files {
		if err := checkFile(f, seen); err != nil {
			errs = append(errs, err)
			continue
		}
		ignFiles = append(ignFiles, ignitionFile(f))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	cfg := igntypes.Config{
		Ignition: igntypes.Ignition{Version: igntypes.MaxVersion.String()},
		Storage:  igntypes.Storage{Files: ignFiles},
	}
	raw, err := json.Marshal(specs[spec].write(cfg))
	if err != nil {
		return nil, fmt.Errorf("encoding Ignition config: %w", err)
	}
	return &mcfgv1.MachineConfig{
		TypeMeta: metav1.TypeMeta{
			APIVersion: mcfgv1.GroupVersion.String(),
			Kind:       "MachineConfig",
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{RoleLabel: role},
		},
		Spec: mcfgv1.MachineConfigSpec{
			Config: runtime.RawExtension{Raw: raw},
			// Empty rather than null: the CRD does not allow null for
			// extensions, and kubectl would report a diff on every apply.
			KernelArguments: []string{},
			Extensions:      []string{},
		},
	}, nil
}

// Marshal returns YAML ready for `oc apply -f` (apiVersion
// machineconfiguration.openshift.io/v1, kind MachineConfig).
func Marshal(mc *mcfgv1.MachineConfig) ([]byte, error) {
	return yaml.Marshal(mc)
}

// Validate judges the embedded config as target's Machine Config Operator
// would: Ignition's parser and validator for the spec it knows, then its own
// refusal of special mode bits. Ignition's warnings count as well: the MCO
// applies such a config, but what lands on the node is not what was asked
// for.
func Validate(mc *mcfgv1.MachineConfig, target openshiftrelease.Release) error {
	raw := mc.Spec.Config.Raw
	if len(raw) == 0 {
		return fmt.Errorf("MachineConfig %s: no Ignition config", mc.Name)
	}
	spec, err := ignitionSpec(target)
	if err != nil {
		return fmt.Errorf("MachineConfig %s: %w", mc.Name, err)
	}
	judge := fmt.Sprintf("OpenShift %s (Ignition %s)", target, spec)
	report, err := specs[spec].parse(raw)
	if err != nil {
		if len(report.Entries) > 0 {
			return fmt.Errorf("MachineConfig %s: %s: %w:\n%s", mc.Name, judge, err, report)
		}
		return fmt.Errorf("MachineConfig %s: %s: %w", mc.Name, judge, err)
	}
	if len(report.Entries) > 0 {
		return fmt.Errorf("MachineConfig %s: %s reports:\n%s", mc.Name, judge, report)
	}
	if err := SpecialModeBits(raw); err != nil {
		return fmt.Errorf("MachineConfig %s: %s: %w", mc.Name, judge, err)
	}
	return nil
}

// SpecialModeBits is the MCO's own rule on top of Ignition's
// (validateIgn3FileModes, https://bugzilla.redhat.com/show_bug.cgi?id=2038240):
// no file mode beyond 0777, so no setuid, setgid or sticky bit. The JSON is
// read directly because the rule is the same in every 3.x spec.
func SpecialModeBits(raw []byte) error {
	var cfg struct {
		Storage struct {
			Files []struct {
				Path string `json:"path"`
				Mode *int   `json:"mode"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	for _, f := range cfg.Storage.Files {
		if f.Mode != nil && fs.FileMode(*f.Mode) > fs.ModePerm {
			return fmt.Errorf("file %s: mode %#o: the Machine Config Operator refuses modes beyond %#o", f.Path, *f.Mode, fs.ModePerm)
		}
	}
	return nil
}

func checkFile(f onnode.File, seen map[string]bool) error {
	p := f.Path
	switch {
	case !path.IsAbs(p):
		return fmt.Errorf("file %q: path must be absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("file %q: path must be clean (%q)", p, path.Clean(p))
	case !underWritableRoot(p):
		return fmt.Errorf("file %q: the Machine Config Operator only writes below %s", p, strings.Join(writableRoots, " and "))
	case seen[p]:
		return fmt.Errorf("file %q: listed more than once", p)
	case f.Mode&^fs.ModePerm != 0:
		// The MCO refuses setuid, setgid and sticky bits, and fs.FileMode
		// keeps type bits Ignition has no field for.
		return fmt.Errorf("file %q: mode %v has bits beyond permissions", p, f.Mode)
	}
	seen[p] = true
	return nil
}

func underWritableRoot(p string) bool {
	for _, root := range writableRoots {
		if strings.HasPrefix(p, root) {
			return true
		}
	}
	return false
}

func ignitionFile(f onnode.File) igntypes.File {
	return igntypes.File{
		Node: igntypes.Node{
			Path: f.Path,
			// Ignition refuses to replace an existing file unless told to,
			// and the MCO always replaces: say it, so both agree.
			Overwrite: ptr.To(true),
			User:      igntypes.NodeUser{Name: ptr.To("root")},
			Group:     igntypes.NodeGroup{Name: ptr.To("root")},
		},
		FileEmbedded1: igntypes.FileEmbedded1{
			Mode:     ptr.To(int(f.Mode.Perm())),
			Contents: igntypes.Resource{Source: ptr.To(dataURL(f.Data))},
		},
	}
}

// dataURL encodes data as an RFC 2397 URL, percent-encoded or base64,
// whichever is shorter: configs stay legible in `oc get machineconfig -o
// yaml`, and data full of reserved bytes does not triple in size.
func dataURL(data []byte) string {
	escaped := percentEncode(data)
	b64 := base64.StdEncoding.EncodeToString(data)
	if len(escaped) <= len(";base64")+len(b64) {
		return "data:," + escaped
	}
	return "data:;base64," + b64
}

// percentEncode leaves only RFC 2396's unreserved characters as they are.
// net/url's escapers keep more (such as '+', which some decoders turn into
// a space), and the data URL decoder Ignition uses rejects non-ASCII bytes.
func percentEncode(data []byte) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(data))
	for _, c := range data {
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

func unreserved(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.!~*'()", c) >= 0
}
