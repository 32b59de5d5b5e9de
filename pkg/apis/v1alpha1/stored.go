package v1alpha1

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Stored copies of the config are the ones vipctl wrote itself for its
// readers: the vipctl-config ConfigMap (render's manifests, `vipctl
// update`), the cluster.yaml the MachineConfigs lay on the nodes, and the
// config of the sidecar's last-good view. During an upgrade or a rollback
// two releases share them, and the one that wrote a copy may be newer than
// the one reading it (docs/upgrade.md, "Version skew"). Their readers (the
// sidecar, its init container, the allocator, `vipctl status` and
// `vipctl diagnose`) use ParseStored or LoadStored: a field this release
// does not know is no error but a warning, as an older Kubernetes client
// reads what a newer server writes. What a person writes (`vipctl
// validate`, `render`, `update -f`) stays strict: Parse and Load, where a
// misspelt option must not fall back to its default.
//
// Only unknown fields are forgiven. A known field of the wrong kind, a
// second document, a value Validate refuses are errors as in Parse: they
// are no newer release's addition but a damaged copy.

// UnknownFields are the paths of the fields a stored copy holds and this
// release does not know (spec.servicePools[0].futureKnob), sorted.
type UnknownFields []string

// String names the fields, or "" for none.
func (u UnknownFields) String() string {
	if len(u) == 0 {
		return ""
	}
	return "fields this vipctl does not know (written by a newer one), ignored: " + strings.Join(u, ", ")
}

// DecodeStored is Decode for a stored copy: unknown fields are returned,
// not refused.
func DecodeStored(data []byte) (*ClusterVIPs, UnknownFields, error) {
	c, unknown, err := decode(data, true)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(unknown)
	return c, unknown, nil
}

// ParseStored is Parse for a stored copy (decode, default, validate):
// unknown fields are returned, not refused; every other problem is the
// error Parse gives.
func ParseStored(data []byte) (*ClusterVIPs, UnknownFields, error) {
	c, unknown, err := DecodeStored(data)
	if err != nil {
		return nil, nil, err
	}
	if c, err = defaultValid(c); err != nil {
		return nil, nil, err
	}
	return c, unknown, nil
}

// LoadStored is Load for a stored copy on disk (the cluster.yaml of the
// MachineConfigs): ParseStored, its errors naming the file.
func LoadStored(path string) (*ClusterVIPs, UnknownFields, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, unknown, err := ParseStored(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, unknown, nil
}
