package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Where a node's live config comes from, as AnnotationNodeConfig says.
const (
	// SourceObject: the ClusterVIPs object (AnnotationConfigSource).
	SourceObject = "clustervips"
	// SourceConfigMap: the vipctl-config ConfigMap.
	SourceConfigMap = "configmap"
	// SourceFile: the node's cluster file alone (no ConfigMap yet).
	SourceFile = "file"
)

// AppliedConfig is the value of AnnotationNodeConfig: the SpecDigest of
// the config a node's sidecar applied and where it read it, written
// "DIGEST SOURCE". A reader ignores words after the second (a later
// release may add some).
type AppliedConfig struct {
	Digest string
	Source string
}

func (a AppliedConfig) String() string { return strings.TrimSpace(a.Digest + " " + a.Source) }

// ParseAppliedConfig reads an AnnotationNodeConfig value.
func ParseAppliedConfig(s string) AppliedConfig {
	f := strings.Fields(s)
	var a AppliedConfig
	if len(f) > 0 {
		a.Digest = f[0]
	}
	if len(f) > 1 {
		a.Source = f[1]
	}
	return a
}

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
