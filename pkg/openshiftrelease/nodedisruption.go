package openshiftrelease

// NodeDisruptionPolicies is the first release whose Machine Config
// Operator applies a MachineConfiguration's spec.nodeDisruptionPolicy on
// the default feature set: openshift/api's NodeDisruptionPolicy gate is
// enabled in Default from release-4.17 (features/features.go; 4.16 only
// in TechPreviewNoUpgrade, which cannot be turned off again and blocks
// upgrades) and removed, always on, from release-4.20. Before it, every
// change to a MachineConfig drains and reboots each node of its pool.
var NodeDisruptionPolicies = Release{4, 17}

// nodeDisruptionPoliciesTechPreview is the release that has them only
// in TechPreviewNoUpgrade.
var nodeDisruptionPoliciesTechPreview = Release{4, 16}

// HasNodeDisruptionPolicies tells whether r's Machine Config Operator
// applies node disruption policies, so that a MachineConfig change can
// reach a node without a drain or a reboot.
func (r Release) HasNodeDisruptionPolicies() bool { return !r.Less(NodeDisruptionPolicies) }

// NodeDisruptionPoliciesNote says, for a release without node disruption
// policies on its default feature set, whether it has them elsewhere.
func (r Release) NodeDisruptionPoliciesNote() string {
	if r == nodeDisruptionPoliciesTechPreview {
		return " on its default feature set (only with TechPreviewNoUpgrade, which cannot be turned off and blocks upgrades)"
	}
	return ""
}
