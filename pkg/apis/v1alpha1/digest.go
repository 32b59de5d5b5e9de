package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// SpecDigest names a spec by its content: "sha256:" and the first 16 hex
// digits of the SHA-256 of its defaulted JSON. A spec read from the
// ConfigMap, from a cluster file or from the ClusterVIPs object gives the
// same digest when the three say the same (the apiserver's schema
// defaults are SetDefaults'; TestCRD checks it), so a node's
// AnnotationNodeConfig can be compared with the object's spec. name is the
// cluster's (metadata.name): defaults derive from it.
func SpecDigest(name string, s ClusterVIPsSpec) string {
	// A copy through JSON: SetDefaults writes into slices and maps the
	// caller's spec shares.
	raw, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	var c ClusterVIPs
	c.Metadata.Name = name
	if json.Unmarshal(raw, &c.Spec) != nil {
		return ""
	}
	SetDefaults(&c)
	if raw, err = json.Marshal(c.Spec); err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:8])
}
