package e2e

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/update"
)

// poolFieldsBase is one pool with its namespaces named (a pool with
// externalIPs must name them).
const poolFieldsBase = `  servicePools:
    - name: web
      addresses: [198.51.100.128/27]
      namespaces: [shop]
`

// TestUpdateWritesEveryPoolField: against the real apiserver, an edit of
// one pool field alone, for each field update's plan left out on main
// (maxPerNamespace, shareAcrossNamespaces, externalIPs, interface,
// interfaceLabel), is planned as that field's path with both values, no
// reboot, and is written to the ConfigMap; undoing it is planned and
// written the same way. On main each edit printed "no change" and left
// the ConfigMap as it was.
func TestUpdateWritesEveryPoolField(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", poolFieldsBase)
	e := startAllocEnv(t, base)
	ctx := context.Background()
	kubeconfig, file := updateFiles(t, e.api, base)
	run := func(text string) (int, string, string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig)
	}
	livePool := func() v1alpha1.ServicePool {
		t.Helper()
		live, _, err := update.Cluster{Kube: e.admin, Namespace: onnode.Namespace}.Live(ctx)
		if err != nil || live == nil || len(live.Spec.ServicePools) != 1 {
			t.Fatalf("the live config: %+v, %v", live, err)
		}
		return live.Spec.ServicePools[0]
	}
	// The lab applied vipctl.yaml only: the first update brings the rest
	// in line and pins the VRRP IDs.
	if code, out, errOut := run(base); code != 0 {
		t.Fatalf("first update: %d\n%s%s", code, out, errOut)
	}
	before := livePool()

	cases := []struct {
		name string
		// line is added under namespaces: one field of the pool.
		line string
		// field is its plan line; undo the plan line taking it back.
		field, undo string
		want        func(*v1alpha1.ServicePool)
	}{
		{"maxPerNamespace", "      maxPerNamespace: 5\n",
			"spec.servicePools[0].maxPerNamespace: 0 -> 5", "spec.servicePools[0].maxPerNamespace: 5 -> 0",
			func(p *v1alpha1.ServicePool) { p.MaxPerNamespace = 5 }},
		{"shareAcrossNamespaces", "      shareAcrossNamespaces: true\n",
			"spec.servicePools[0].shareAcrossNamespaces: false -> true", "spec.servicePools[0].shareAcrossNamespaces: true -> false",
			func(p *v1alpha1.ServicePool) { p.ShareAcrossNamespaces = true }},
		{"externalIPs", "      externalIPs: true\n",
			"spec.servicePools[0].externalIPs: false -> true", "spec.servicePools[0].externalIPs: true -> false",
			func(p *v1alpha1.ServicePool) { p.ExternalIPs = true }},
		{"interface", "      interface: bond0.100\n",
			`spec.servicePools[0].interface: "" -> bond0.100`, `spec.servicePools[0].interface: bond0.100 -> ""`,
			func(p *v1alpha1.ServicePool) { p.Interface = "bond0.100" }},
		{"interfaceLabel", "      interfaceLabel: vipctl.io/dmz-interface\n",
			`spec.servicePools[0].interfaceLabel: "" -> vipctl.io/dmz-interface`, `spec.servicePools[0].interfaceLabel: vipctl.io/dmz-interface -> ""`,
			func(p *v1alpha1.ServicePool) { p.InterfaceLabel = "vipctl.io/dmz-interface" }},
	}
	for _, tc := range cases {
		// One apiserver for every case: each undoes its edit.
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(base, "      namespaces: [shop]\n", "      namespaces: [shop]\n"+tc.line, 1)
			code, out, errOut := run(edited)
			if want := "~ pool web\n    " + tc.field + "\nno MachineConfig change: no node reboots\n"; code != 0 || out != want {
				t.Fatalf("update with %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and stdout:\n%s", strings.TrimSpace(tc.line), code, out, errOut, want)
			}
			want := before
			tc.want(&want)
			if got := livePool(); !reflect.DeepEqual(got, want) {
				t.Errorf("the ConfigMap's pool after the update:\n%+v\nwant:\n%+v", got, want)
			}

			code, out, errOut = run(base)
			if want := "~ pool web\n    " + tc.undo + "\nno MachineConfig change: no node reboots\n"; code != 0 || out != want {
				t.Fatalf("undoing it: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and stdout:\n%s", code, out, errOut, want)
			}
			if got := livePool(); !reflect.DeepEqual(got, before) {
				t.Errorf("the ConfigMap's pool after undoing:\n%+v\nwant:\n%+v", got, before)
			}
		})
	}
}
