package update

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

var clusterVersionGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}

// ReleaseFinding is what the cluster's ClusterVersion says about a
// config's spec.openshiftRelease.
type ReleaseFinding struct {
	// Message says how the cluster's release falls short of the target;
	// empty when it does not (or its version cannot be read).
	Message string `json:"message"`
	// Fix says which target to set instead; empty when no supported
	// release fits the cluster.
	Fix string `json:"fix,omitempty"`
	// Degrades is true when the cluster's Machine Config Operator would
	// refuse MachineConfigs written for the target: it parses an older
	// Ignition spec, or the cluster is older than any release vipctl
	// knows. Their pools would degrade and lay nothing down.
	Degrades bool `json:"degrades"`
}

// ErrReleaseTooNew refuses MachineConfigs the cluster's Machine Config
// Operator cannot parse.
var ErrReleaseTooNew = errors.New("refusing to write MachineConfigs the cluster cannot parse")

// CheckRelease compares cfg's spec.openshiftRelease with the release the
// cluster runs. It finds nothing when the cluster is as new or newer, and
// when its version cannot be read (plain Kubernetes has no ClusterVersion,
// a user may not be allowed to read it).
func (c Cluster) CheckRelease(ctx context.Context, cfg *v1alpha1.ClusterVIPs) ReleaseFinding {
	target, err := openshiftrelease.Parse(cfg.Spec.OpenShiftRelease)
	if err != nil || c.Dynamic == nil {
		return ReleaseFinding{}
	}
	cv, err := c.Dynamic.Resource(clusterVersionGVR).Get(ctx, "version", metav1.GetOptions{})
	if err != nil {
		return ReleaseFinding{}
	}
	version := oldestRunning(cv)
	running, err := openshiftrelease.FromVersion(version)
	if err != nil || !running.Less(target) {
		return ReleaseFinding{}
	}
	msg := fmt.Sprintf("the cluster runs OpenShift %s, older than spec.openshiftRelease %s", version, target)
	runningSpec, known := running.IgnitionSpec()
	targetSpec, _ := target.IgnitionSpec()
	fix := fmt.Sprintf("set spec.openshiftRelease to %s", running)
	switch {
	case !known:
		return ReleaseFinding{Degrades: true, Message: msg + fmt.Sprintf(", and vipctl supports no release older than %s", openshiftrelease.Default())}
	case runningSpec != targetSpec:
		return ReleaseFinding{Degrades: true, Fix: fix,
			Message: msg + fmt.Sprintf(": its Machine Config Operator parses Ignition %s at most and would refuse MachineConfigs written for %s (Ignition %s)", runningSpec, target, targetSpec)}
	}
	return ReleaseFinding{Message: msg, Fix: fix}
}

// Warning is the finding as advice: what is wrong and what to set.
func (f ReleaseFinding) Warning() string {
	if f.Fix == "" {
		return f.Message
	}
	return f.Message + "; " + f.Fix
}

// Refusal is the error that stops MachineConfigs the finding says the
// cluster would refuse.
func (f ReleaseFinding) Refusal() error {
	fix := "pass --force to write them anyway"
	if f.Fix != "" {
		fix = f.Fix + " in the file, or " + fix
	}
	return fmt.Errorf("%w: %s, and its machine-config pools would degrade; %s", ErrReleaseTooNew, f.Message, fix)
}

// ReleaseWarning is CheckRelease as advice, for commands that write no
// MachineConfig (vipctl status).
func (c Cluster) ReleaseWarning(ctx context.Context, cfg *v1alpha1.ClusterVIPs) string {
	return c.CheckRelease(ctx, cfg).Warning()
}

// oldestRunning is the version the whole cluster runs at least: the newest
// completed one in status.history (newest first). During an upgrade the
// older release's MCO may still be the one parsing MachineConfigs.
func oldestRunning(cv *unstructured.Unstructured) string {
	history, _, _ := unstructured.NestedSlice(cv.Object, "status", "history")
	for _, h := range history {
		entry, ok := h.(map[string]any)
		if !ok {
			continue
		}
		if entry["state"] == "Completed" {
			if v, ok := entry["version"].(string); ok {
				return v
			}
		}
	}
	// Still installing: nothing older has ever run.
	v, _, _ := unstructured.NestedString(cv.Object, "status", "desired", "version")
	return v
}
