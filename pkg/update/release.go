package update

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

var clusterVersionGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}

// ReleaseWarning says when the cluster runs an OpenShift release older than
// cfg's spec.openshiftRelease: MachineConfigs written for it may carry an
// Ignition spec the cluster's Machine Config Operator refuses, which
// degrades the pool. Empty when the cluster is as new or newer, and when
// its version cannot be read (plain Kubernetes has no ClusterVersion, a
// user may not be allowed to read it): this is advice, never a reason to
// stop.
func (c Cluster) ReleaseWarning(ctx context.Context, cfg *v1alpha1.ClusterVIPs) string {
	target, err := openshiftrelease.Parse(cfg.Spec.OpenShiftRelease)
	if err != nil || c.Dynamic == nil {
		return ""
	}
	cv, err := c.Dynamic.Resource(clusterVersionGVR).Get(ctx, "version", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	version := oldestRunning(cv)
	running, err := openshiftrelease.FromVersion(version)
	if err != nil || !running.Less(target) {
		return ""
	}
	msg := fmt.Sprintf("the cluster runs OpenShift %s, older than spec.openshiftRelease %s", version, target)
	runningSpec, known := running.IgnitionSpec()
	targetSpec, _ := target.IgnitionSpec()
	switch {
	case !known:
		return msg + fmt.Sprintf(", and vipctl supports no release older than %s", openshiftrelease.Default())
	case runningSpec != targetSpec:
		return msg + fmt.Sprintf(": its Machine Config Operator parses Ignition %s at most and would refuse MachineConfigs written for %s (Ignition %s); set spec.openshiftRelease to %s", runningSpec, target, targetSpec, running)
	}
	return msg + fmt.Sprintf("; set spec.openshiftRelease to %s", running)
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
