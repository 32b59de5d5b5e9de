package bundle

import (
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
	"github.com/vipctl/vipctl/pkg/render"
)

// DisruptionPolicyPath holds vipctl's node disruption policy, for a
// target release that has them (openshiftrelease.NodeDisruptionPolicies).
// Not under machineconfigs/ or manifests/, which `oc apply -f` reads with
// a client-side apply: on the shared MachineConfiguration "cluster" that
// would replace every other user's entries. It is applied with `oc apply
// --server-side --field-manager=vipctl` (docs/render.md), or by `vipctl
// update` before it writes MachineConfigs.
const DisruptionPolicyPath = "node-disruption/machineconfiguration.yaml"

// FileDisruption is what a change of one file of vipctl's MachineConfigs
// costs a node, and why.
type FileDisruption struct {
	Path string
	// Action is what the node does instead of a drain and a reboot;
	// Reboot for the files left to the Machine Config Operator's default.
	Action operatorv1.NodeDisruptionPolicySpecAction
	Why    string
}

var noAction = operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.NoneSpecAction}

// NoRebootFiles are every file vipctl's MachineConfigs may lay down
// (either role, any config) whose change applies without a drain or a
// reboot. The list does not depend on the config, so a policy applied
// before new MachineConfigs also covers a file the new ones add or drop
// (a pool moved to or from mode poolsOnly adds or drops haproxy's pod).
// Keep a path here after vipctl stops writing it: the release that drops
// it must still apply its removal without a reboot.
func NoRebootFiles() ([]FileDisruption, error) {
	files := []FileDisruption{
		{
			Path:   manifests.StaticPodPath(onnode.KeepalivedPodName),
			Action: noAction,
			Why:    "the kubelet watches " + onnode.StaticPodDir + " and replaces a static pod whose manifest changed; the old keepalived pod's preStop hook first hands its VIPs to a peer (make-before-break), and the new one starts held back until its sidecar has synced",
		},
		{
			Path:   manifests.StaticPodPath(onnode.HaproxyPodName),
			Action: noAction,
			Why:    "the kubelet replaces the pod; while this node's haproxy is down its keepalived check fails and a node whose haproxy is ready holds the API VIP",
		},
		{
			Path:   onnode.ClusterConfigPath,
			Action: noAction,
			Why:    "read when the keepalived pod starts; that pod's manifest carries the file's digest (" + manifests.ClusterFileDigestAnnotation + "), so a new file is a new manifest and the kubelet restarts the pod, which reads it",
		},
		{
			Path:   onnode.BootstrapNodesPath,
			Action: noAction,
			Why:    "read only when a pod starts while the API cannot be reached; a running sidecar follows the live Nodes",
		},
	}
	scripts := render.ScriptFiles()
	for _, s := range scripts {
		files = append(files, FileDisruption{
			Path:   s.Path,
			Action: noAction,
			Why:    "keepalived runs the check anew at every interval, and the Machine Config Operator replaces a file atomically",
		})
	}
	return files, nil
}

// RebootFiles are the files of vipctl's MachineConfigs whose change still
// drains and reboots each node of the pool, with why. The policy leaves
// them out, which is the Machine Config Operator's default: Reboot.
var RebootFiles = []FileDisruption{{
	Path:   onnode.SysctlPath,
	Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.RebootSpecAction},
	Why:    "kernel settings, which systemd-sysctl applies at boot; a Restart of systemd-sysctl.service would apply them too, but it also applies every other sysctl.d file again, over what was set since boot (the Node Tuning Operator's TuneD sets kernel settings at run time), and it cannot take a removed setting back",
}}

// DisruptionPolicy is vipctl's node disruption policy: every file of
// NoRebootFiles.
func DisruptionPolicy() (*machineconfig.DisruptionPolicy, error) {
	files, err := NoRebootFiles()
	if err != nil {
		return nil, err
	}
	entries := make([]machineconfig.NoReboot, len(files))
	for i, f := range files {
		entries[i] = machineconfig.NoReboot{Path: f.Path, Action: f.Action}
	}
	return machineconfig.BuildDisruptionPolicy(entries)
}

// disruptionFiles is DisruptionPolicyPath for a target with node
// disruption policies, nothing for an older one (RebootWarning says what
// happens there).
func disruptionFiles(target openshiftrelease.Release) ([]File, error) {
	if !target.HasNodeDisruptionPolicies() {
		return nil, nil
	}
	p, err := DisruptionPolicy()
	if err != nil {
		return nil, fmt.Errorf("node disruption policy: %w", err)
	}
	data, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	return []File{{Path: DisruptionPolicyPath, Mode: 0o644, Data: data}}, nil
}

// RebootWarning is what render and update say for a target without node
// disruption policies; empty for one with them.
func RebootWarning(target openshiftrelease.Release) string {
	if target.HasNodeDisruptionPolicies() {
		return ""
	}
	return fmt.Sprintf("OpenShift %s applies no node disruption policies%s: every change to vipctl's MachineConfigs (a new image, a changed cluster file) drains and reboots each node of the pool, one at a time. Target %s or later (--openshift-release, spec.openshiftRelease) once every cluster this output serves runs it, and render writes %s, which lets the nodes take those changes without a drain or a reboot (docs/render.md)", target, target.NodeDisruptionPoliciesNote(), openshiftrelease.NodeDisruptionPolicies, DisruptionPolicyPath)
}
