package update

import (
	"bytes"
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/vipctl/vipctl/pkg/machineconfig"
)

// TestApplyWritesDisruptionPolicyFirst: when an update writes
// MachineConfigs for a target with node disruption policies, it first
// applies render's policy to the MachineConfiguration (server-side, as
// vipctl), so the MachineConfigs meet it; without the object it warns and
// writes them; for an older target it says they reboot; a conflict stops
// it before any MachineConfig is written. The real apiserver's side is
// test/e2e TestMachineConfigurationNodeDisruptionPolicy.
func TestApplyWritesDisruptionPolicyFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		target     string
		object     bool  // the MCO's MachineConfiguration exists
		applyErr   error // what the apiserver answers the apply
		wantApply  bool
		wantMCs    bool
		wantLog    []string
		wantErrSub string
	}{
		{name: "4.17 with the object", target: "4.17", object: true, wantApply: true, wantMCs: true,
			wantLog: []string{"applied vipctl's node disruption policy to MachineConfiguration cluster\n", "wrote MachineConfig 50-vipctl-master\n", "the Machine Config Operator will now roll the nodes of each pool, without draining or rebooting them (node disruption policy)"}},
		{name: "4.19 without the object", target: "4.19", wantMCs: true,
			wantLog: []string{"warning: the cluster has no MachineConfiguration cluster for vipctl's node disruption policy: the new MachineConfigs drain and reboot every node\n", "the Machine Config Operator will now roll (drain and reboot) the nodes of each pool\n"}},
		{name: "4.16", target: "4.16", object: true, wantMCs: true,
			wantLog: []string{"warning: OpenShift 4.16 applies no node disruption policies on its default feature set", "the Machine Config Operator will now roll (drain and reboot) the nodes of each pool\n"}},
		{name: "conflict", target: "4.17", object: true, wantApply: true,
			applyErr:   apierrors.NewConflict(schema.GroupResource{Group: "operator.openshift.io", Resource: "machineconfigurations"}, "cluster", nil),
			wantErrSub: "MachineConfiguration cluster: another manager owns an entry of vipctl's node disruption policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Compute(targeting(t, "4.14"), targeting(t, tc.target), nil)
			if err != nil {
				t.Fatal(err)
			}
			var objs []runtime.Object
			if tc.object {
				mcfg := &unstructured.Unstructured{}
				mcfg.SetAPIVersion("operator.openshift.io/v1")
				mcfg.SetKind("MachineConfiguration")
				mcfg.SetName(machineconfig.MachineConfigurationName)
				objs = append(objs, mcfg)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{machineconfig.GVR: "MachineConfigList", machineconfig.MachineConfigurationGVR: "MachineConfigurationList"}, objs...)
			var order []string
			applied := false
			dyn.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				order = append(order, a.GetVerb()+" "+a.GetResource().Resource)
				return false, nil, nil
			})
			dyn.PrependReactor("patch", "machineconfigurations", func(a clienttesting.Action) (bool, runtime.Object, error) {
				pa := a.(clienttesting.PatchActionImpl)
				if pa.PatchType != types.ApplyPatchType || pa.PatchOptions.FieldManager != machineconfig.FieldManager || (pa.PatchOptions.Force != nil && *pa.PatchOptions.Force) {
					t.Errorf("patch %s as %q, want a server-side apply as %s, never forced", pa.PatchType, pa.PatchOptions.FieldManager, machineconfig.FieldManager)
				}
				if !strings.Contains(string(pa.Patch), "/etc/vipctl/cluster.yaml") {
					t.Errorf("applied %s, want render's policy", pa.Patch)
				}
				applied = true
				if tc.applyErr != nil {
					return true, nil, tc.applyErr
				}
				obj := &unstructured.Unstructured{}
				obj.SetAPIVersion("operator.openshift.io/v1")
				obj.SetKind("MachineConfiguration")
				obj.SetName(machineconfig.MachineConfigurationName)
				return true, obj, nil
			})
			var log bytes.Buffer
			err = Cluster{Kube: kubefake.NewClientset(), Dynamic: dyn, Namespace: "vipctl-system"}.Apply(context.Background(), p, nil, false, &log)
			switch {
			case tc.wantErrSub == "" && err != nil:
				t.Fatal(err)
			case tc.wantErrSub != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrSub)):
				t.Fatalf("error %v, want %q", err, tc.wantErrSub)
			}
			if applied != tc.wantApply {
				t.Errorf("policy applied: %v, want %v", applied, tc.wantApply)
			}
			firstMC := -1
			lastPolicy := -1
			for i, o := range order {
				switch o {
				case "create machineconfigs", "update machineconfigs":
					if firstMC < 0 {
						firstMC = i
					}
				case "patch machineconfigurations":
					lastPolicy = i
				}
			}
			if (firstMC >= 0) != tc.wantMCs {
				t.Errorf("MachineConfigs written: %v, want %v (%v)", firstMC >= 0, tc.wantMCs, order)
			}
			if lastPolicy >= 0 && firstMC >= 0 && lastPolicy > firstMC {
				t.Errorf("policy applied after the MachineConfigs: %v", order)
			}
			for _, w := range tc.wantLog {
				if !strings.Contains(log.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, log.String())
				}
			}
		})
	}
}
