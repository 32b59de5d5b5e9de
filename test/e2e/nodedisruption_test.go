package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/update"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// TestMachineConfigurationNodeDisruptionPolicy applies the node
// disruption policy `vipctl render --openshift-release 4.17` writes to a
// real kube-apiserver with the MachineConfiguration CRD of the
// openshift/api module, the way docs/render.md says and `vipctl update`
// does (server-side, field manager vipctl), into the object the Machine
// Config Operator creates and another team already tuned:
//
//   - with no such object (no CRD, or no object yet) nothing is written;
//   - the CRD's schema and CEL rules accept vipctl's entries;
//   - the MCO's managementState and the other team's entry stay, an entry
//     vipctl applied before and no longer sends goes;
//   - an entry another manager owns is a conflict, never taken over;
//   - a JSON merge patch of the same file (oc patch --type=merge) would
//     have deleted the other team's entry: why the docs forbid it.
func TestMachineConfigurationNodeDisruptionPolicy(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	out := filepath.Join(t.TempDir(), "out")
	if code, stdout, stderr := vipctl(t, "render", "-f", "../../examples/compact-ipv4.yaml", "--out-dir", out, "--openshift-release", "4.17"); code != 0 {
		t.Fatalf("vipctl render: exit %d\n%s%s", code, stdout, stderr)
	}
	policy, err := os.ReadFile(filepath.Join(out, bundle.DisruptionPolicyPath))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := bundle.DisruptionPolicy()
	if err != nil {
		t.Fatal(err)
	}

	srv := testapiserver.Start(t)
	client, err := dynamic.NewForConfig(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ri := client.Resource(machineconfig.MachineConfigurationGVR)

	if applied, err := update.ApplyDisruptionPolicy(ctx, client, policy); applied || err != nil {
		t.Errorf("without the CRD: applied %v, %v; want nothing written and no error", applied, err)
	}
	srv.InstallCRDs(t, testapiserver.MachineConfigurationCRD(t))
	if applied, err := update.ApplyDisruptionPolicy(ctx, client, policy); applied || err != nil {
		t.Errorf("before the MCO created the object: applied %v, %v; want nothing written and no error", applied, err)
	}
	if _, err := ri.Get(ctx, machineconfig.MachineConfigurationName, metav1.GetOptions{}); err == nil {
		t.Fatal("vipctl created the MCO's MachineConfiguration")
	}

	// The MCO creates the object with an apply of its own (pkg/operator/sync.go,
	// syncMachineConfiguration), then another team adds a policy.
	apply := func(manager, doc string) error {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		_, err := ri.Apply(ctx, machineconfig.MachineConfigurationName, &obj, metav1.ApplyOptions{FieldManager: manager})
		return err
	}
	const head = "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata:\n  name: cluster\n"
	if err := apply("machine-config-operator", head+"spec:\n  managementState: Managed\n"); err != nil {
		t.Fatalf("the MCO's create: %v", err)
	}
	const chrony = head + `spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/chrony.conf
      actions:
      - type: Restart
        restart:
          serviceName: chronyd.service
`
	if err := apply("ntp-team", chrony); err != nil {
		t.Fatalf("the other team's entry: %v", err)
	}

	// An older vipctl's policy with a file this one no longer lays down.
	var older map[string]any
	if err := yaml.Unmarshal(policy, &older); err != nil {
		t.Fatal(err)
	}
	files, _, _ := unstructured.NestedSlice(older, "spec", "nodeDisruptionPolicy", "files")
	files = append(files, map[string]any{"path": "/etc/vipctl/retired.sh", "actions": []any{map[string]any{"type": "None"}}})
	if err := unstructured.SetNestedSlice(older, files, "spec", "nodeDisruptionPolicy", "files"); err != nil {
		t.Fatal(err)
	}
	olderYAML, err := yaml.Marshal(older)
	if err != nil {
		t.Fatal(err)
	}
	if applied, err := update.ApplyDisruptionPolicy(ctx, client, olderYAML); !applied || err != nil {
		t.Fatalf("older policy: applied %v, %v", applied, err)
	}
	if applied, err := update.ApplyDisruptionPolicy(ctx, client, policy); !applied || err != nil {
		t.Fatalf("rendered policy refused: applied %v, %v", applied, err)
	}
	got, err := ri.Get(ctx, machineconfig.MachineConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"/etc/chrony.conf"}, rendered.Paths()...)
	if paths := policyPaths(t, got); !sameSet(paths, want) {
		t.Errorf("policy files %v, want %v (the other team's kept, vipctl's stale one gone)", paths, want)
	}
	if state, _, _ := unstructured.NestedString(got.Object, "spec", "managementState"); state != "Managed" {
		t.Errorf("managementState %q, want the MCO's Managed", state)
	}
	if applied, err := update.ApplyDisruptionPolicy(ctx, client, policy); !applied || err != nil {
		t.Errorf("applying the same policy again: applied %v, %v", applied, err)
	}

	// Someone set one of vipctl's files to Reboot by hand (oc edit).
	edited := got.DeepCopy()
	entries, _, _ := unstructured.NestedSlice(edited.Object, "spec", "nodeDisruptionPolicy", "files")
	for _, e := range entries {
		if e.(map[string]any)["path"] == rendered.Paths()[0] {
			e.(map[string]any)["actions"] = []any{map[string]any{"type": "Reboot"}}
		}
	}
	if err := unstructured.SetNestedSlice(edited.Object, entries, "spec", "nodeDisruptionPolicy", "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := update.ApplyDisruptionPolicy(ctx, client, policy); err == nil || !strings.Contains(err.Error(), "another manager owns an entry of vipctl's node disruption policy") {
		t.Errorf("an entry another manager owns: %v, want a conflict", err)
	}

	// What oc patch --type=merge with the same file would do.
	patch, err := yaml.YAMLToJSON(policy)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := ri.Patch(ctx, machineconfig.MachineConfigurationName, types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(policyPaths(t, merged), "/etc/chrony.conf") {
		t.Error("a merge patch kept the other team's entry: the docs' warning against it is wrong")
	}
}

func policyPaths(t *testing.T, obj *unstructured.Unstructured) []string {
	t.Helper()
	var spec struct {
		Spec struct {
			NodeDisruptionPolicy struct {
				Files []struct {
					Path string `json:"path"`
				} `json:"files"`
			} `json:"nodeDisruptionPolicy"`
		} `json:"spec"`
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range spec.Spec.NodeDisruptionPolicy.Files {
		out = append(out, f.Path)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
