package kubeletlab

import (
	"fmt"
	"io/fs"

	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"
)

// File is one file a MachineConfig lays on a node.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}

// MachineConfigFiles reads the files of a MachineConfig as `vipctl render`
// wrote it (YAML), the way the machine-config daemon does: parse the
// Ignition config in spec.config, take storage.files with their path, mode
// and data URL contents. Nothing comes from render's per-node preview, so
// the lab runs exactly what a node would get.
func MachineConfigFiles(mcYAML []byte) ([]File, error) {
	var mc mcfgv1.MachineConfig
	if err := yaml.UnmarshalStrict(mcYAML, &mc); err != nil {
		return nil, fmt.Errorf("machineconfig: %w", err)
	}
	// The newest parser reads every older spec, as a newer MCO does.
	cfg, report, err := ign35.ParseCompatibleVersion(mc.Spec.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("machineconfig %s: ignition: %w: %s", mc.Name, err, report.String())
	}
	files := make([]File, 0, len(cfg.Storage.Files))
	for _, f := range cfg.Storage.Files {
		if f.Contents.Source == nil || f.Mode == nil {
			return nil, fmt.Errorf("machineconfig %s: %s: no contents or no mode", mc.Name, f.Path)
		}
		if f.Contents.Compression != nil && *f.Contents.Compression != "" {
			return nil, fmt.Errorf("machineconfig %s: %s: compression %q not supported by the lab", mc.Name, f.Path, *f.Contents.Compression)
		}
		u, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("machineconfig %s: %s: %w", mc.Name, f.Path, err)
		}
		files = append(files, File{Path: f.Path, Mode: fs.FileMode(*f.Mode), Data: u.Data})
	}
	return files, nil
}
