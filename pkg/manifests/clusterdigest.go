package manifests

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
)

// ClusterFileDigestAnnotation on the keepalived pod is the SHA-256 of the
// cluster file (onnode.ClusterConfigPath) the same MachineConfig lays down.
// The pod reads that file only when it starts, so a new one must restart
// it: with a reboot that came for free, but a node disruption policy
// applies the file without one (bundle.NoRebootFiles). A new digest is a
// new manifest, and the kubelet replaces a static pod whose manifest
// changed. haproxy's pod does not read the file and carries none.
const ClusterFileDigestAnnotation = "vipctl.io/cluster-file-sha256"

// setClusterFileDigest marks p with the digest of clusterYAML.
func setClusterFileDigest(p *corev1.Pod, clusterYAML []byte) {
	sum := sha256.Sum256(clusterYAML)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[ClusterFileDigestAnnotation] = hex.EncodeToString(sum[:])
}
