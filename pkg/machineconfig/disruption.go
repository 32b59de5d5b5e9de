package machineconfig

import (
	"errors"
	"fmt"
	"path"
	"regexp"

	operatorv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/yaml"
)

// MachineConfigurationGVR is the resource of the Machine Config
// Operator's MachineConfiguration. The MCO reads the node disruption
// policies of a cluster from one MachineConfiguration, named "cluster", which it creates
// itself and shares with everyone else who tunes it (boot images, other
// products' policies). From OpenShift 4.17 (openshiftrelease.
// NodeDisruptionPolicies) its daemon applies a MachineConfig change whose
// every changed file has a policy with the policy's actions instead of a
// drain and a reboot; a changed file without one still reboots the node.
var MachineConfigurationGVR = operatorv1.GroupVersion.WithResource("machineconfigurations")

// MachineConfigurationName is the one MachineConfiguration the Machine
// Config Operator reads.
const MachineConfigurationName = "cluster"

// FieldManager owns vipctl's entries in the shared object. Server-side
// apply keys spec.nodeDisruptionPolicy.files by path, so applying as this
// manager adds and updates vipctl's entries, removes those it sent before
// and no longer sends, and leaves every other manager's alone. A JSON
// merge patch (oc patch --type=merge) would replace the whole list.
const FieldManager = "vipctl"

// MaxPolicyFiles is the CRD's limit on spec.nodeDisruptionPolicy.files, for
// every user of the shared object together.
const MaxPolicyFiles = 50

// NoReboot is a file a MachineConfig lays down whose change a node takes
// with Action and no drain or reboot.
type NoReboot struct {
	Path   string
	Action operatorv1.NodeDisruptionPolicySpecAction
}

// DisruptionPolicy is vipctl's part of MachineConfiguration "cluster", in
// the form server-side apply takes: only the fields vipctl owns. The
// whole operatorv1.MachineConfiguration cannot be sent: its zero values
// are invalid (spec.nodeDisruptionPolicy.sshkey.actions null, as the MCO
// notes where it creates the object with an apply of its own), and sending
// them would claim fields other managers own. The entries are
// openshift/api's own type.
type DisruptionPolicy struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   policyMeta `json:"metadata"`
	Spec       policySpec `json:"spec"`
}

type policyMeta struct {
	Name string `json:"name"`
}

type policySpec struct {
	NodeDisruptionPolicy policyConfig `json:"nodeDisruptionPolicy"`
}

type policyConfig struct {
	Files []operatorv1.NodeDisruptionPolicySpecFile `json:"files"`
}

// serviceName is what the CRD allows for a unit in a Reload or Restart
// action (NodeDisruptionPolicyServiceName's CEL rules).
var serviceName = regexp.MustCompile(`^[a-zA-Z0-9:._\\-]+\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$`)

// BuildDisruptionPolicy is the policy for files, checked as the CRD and
// the Machine Config Operator would check it, with the MCO's own rule on
// top: it only ever writes below /etc and /var, so no other path can name
// one of its files.
func BuildDisruptionPolicy(files []NoReboot) (*DisruptionPolicy, error) {
	var errs []error
	if len(files) > MaxPolicyFiles {
		errs = append(errs, fmt.Errorf("%d files: the MachineConfiguration takes at most %d for the whole cluster", len(files), MaxPolicyFiles))
	}
	seen := map[string]bool{}
	entries := make([]operatorv1.NodeDisruptionPolicySpecFile, 0, len(files))
	for _, f := range files {
		switch {
		case !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path:
			errs = append(errs, fmt.Errorf("file %q: want a clean absolute path", f.Path))
		case !underWritableRoot(f.Path):
			errs = append(errs, fmt.Errorf("file %q: the Machine Config Operator writes nothing outside /etc and /var", f.Path))
		case seen[f.Path]:
			errs = append(errs, fmt.Errorf("file %q: listed more than once", f.Path))
		}
		seen[f.Path] = true
		if err := checkAction(f.Action); err != nil {
			errs = append(errs, fmt.Errorf("file %q: %w", f.Path, err))
		}
		entries = append(entries, operatorv1.NodeDisruptionPolicySpecFile{
			Path:    f.Path,
			Actions: []operatorv1.NodeDisruptionPolicySpecAction{f.Action},
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &DisruptionPolicy{
		APIVersion: operatorv1.GroupVersion.String(),
		Kind:       "MachineConfiguration",
		Metadata:   policyMeta{Name: MachineConfigurationName},
	}
	p.Spec.NodeDisruptionPolicy.Files = entries
	return p, nil
}

// checkAction is the CRD's union rule: a service for Reload and Restart,
// and none for the others.
func checkAction(a operatorv1.NodeDisruptionPolicySpecAction) error {
	switch a.Type {
	case operatorv1.ReloadSpecAction:
		if a.Reload == nil || a.Restart != nil || !serviceName.MatchString(string(a.Reload.ServiceName)) {
			return fmt.Errorf("action %s needs a unit name to reload, and no other", a.Type)
		}
	case operatorv1.RestartSpecAction:
		if a.Restart == nil || a.Reload != nil || !serviceName.MatchString(string(a.Restart.ServiceName)) {
			return fmt.Errorf("action %s needs a unit name to restart, and no other", a.Type)
		}
	case operatorv1.NoneSpecAction, operatorv1.RebootSpecAction, operatorv1.DrainSpecAction, operatorv1.DaemonReloadSpecAction:
		if a.Reload != nil || a.Restart != nil {
			return fmt.Errorf("action %s takes no unit", a.Type)
		}
	default:
		return fmt.Errorf("action %q is not one the Machine Config Operator knows", a.Type)
	}
	return nil
}

// Marshal returns the YAML `oc apply --server-side --field-manager=vipctl
// -f` takes.
func (p *DisruptionPolicy) Marshal() ([]byte, error) { return yaml.Marshal(p) }

// Paths are the files p covers, in its order.
func (p *DisruptionPolicy) Paths() []string {
	out := make([]string, len(p.Spec.NodeDisruptionPolicy.Files))
	for i, f := range p.Spec.NodeDisruptionPolicy.Files {
		out[i] = f.Path
	}
	return out
}
