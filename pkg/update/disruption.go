package update

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/machineconfig"
)

// ApplyDisruptionPolicy brings vipctl's entries of the shared
// MachineConfiguration "cluster" in line with policy (the bytes of
// bundle.DisruptionPolicyPath) by a server-side apply as
// machineconfig.FieldManager: other managers' entries stay, vipctl's
// stale ones go. It runs before the MachineConfigs are written: the
// Machine Config daemon waits for the operator to carry a new policy into
// the object's status before it decides how to apply a MachineConfig, so
// the new MachineConfigs meet the new policy. false, with nothing written,
// when the cluster has no such object (no Machine Config Operator, or one
// that has not created it yet): the MachineConfigs then reboot the nodes.
// An entry another manager owns is a conflict, reported, never taken over.
func ApplyDisruptionPolicy(ctx context.Context, client dynamic.Interface, policy []byte) (bool, error) {
	ri := client.Resource(machineconfig.MachineConfigurationGVR)
	if _, err := ri.Get(ctx, machineconfig.MachineConfigurationName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("MachineConfiguration %s: %w", machineconfig.MachineConfigurationName, err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(policy, &obj.Object); err != nil {
		return false, fmt.Errorf("%s: %w", bundle.DisruptionPolicyPath, err)
	}
	if _, err := ri.Apply(ctx, machineconfig.MachineConfigurationName, obj, metav1.ApplyOptions{FieldManager: machineconfig.FieldManager}); err != nil {
		if apierrors.IsConflict(err) {
			return false, fmt.Errorf("MachineConfiguration %s: another manager owns an entry of vipctl's node disruption policy (%w): remove that entry, or apply %s yourself with oc apply --server-side --field-manager=%s --force-conflicts", machineconfig.MachineConfigurationName, err, bundle.DisruptionPolicyPath, machineconfig.FieldManager)
		}
		return false, fmt.Errorf("MachineConfiguration %s: %w", machineconfig.MachineConfigurationName, err)
	}
	return true, nil
}

// applyDisruptionPolicy applies the policy among files, if the target
// has one, and says what the coming roll of the MachineConfigs costs.
func (c Cluster) applyDisruptionPolicy(ctx context.Context, files []bundle.File, warning string, out io.Writer) (rollMessage string, err error) {
	const reboots = "the Machine Config Operator will now roll (drain and reboot) the nodes of each pool"
	for _, f := range files {
		if f.Path != bundle.DisruptionPolicyPath {
			continue
		}
		applied, err := ApplyDisruptionPolicy(ctx, c.Dynamic, f.Data)
		if err != nil {
			return "", err
		}
		if !applied {
			_, _ = fmt.Fprintf(out, "warning: the cluster has no MachineConfiguration %s for vipctl's node disruption policy: the new MachineConfigs drain and reboot every node\n", machineconfig.MachineConfigurationName)
			return reboots, nil
		}
		_, _ = fmt.Fprintf(out, "applied vipctl's node disruption policy to MachineConfiguration %s\n", machineconfig.MachineConfigurationName)
		return "the Machine Config Operator will now roll the nodes of each pool, without draining or rebooting them (node disruption policy): the kubelets replace vipctl's static pods", nil
	}
	_, _ = fmt.Fprintln(out, "warning:", warning)
	return reboots, nil
}
