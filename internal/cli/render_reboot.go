package cli

import (
	"fmt"
	"io"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// warnReboots tells, for a target release without node disruption
// policies, that every change to the MachineConfigs about to be written
// reboots the nodes (docs/render.md, "Which changes reboot a node").
func warnReboots(w io.Writer, c *v1alpha1.ClusterVIPs) {
	target, err := openshiftrelease.Parse(c.Spec.OpenShiftRelease)
	if err != nil {
		return // refused by the render itself, with the field's name
	}
	if msg := bundle.RebootWarning(target); msg != "" {
		_, _ = fmt.Fprintln(w, "warning:", msg)
	}
}
