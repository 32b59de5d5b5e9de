package bundle_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/golden"
)

// TestDisruptionPolicyGolden pins, for every supported release, what
// render writes for the node disruption policy: the MachineConfiguration
// entries from 4.17 on, nothing and the warning before.
func TestDisruptionPolicyGolden(t *testing.T) {
	t.Parallel()
	for _, r := range openshiftrelease.Supported() {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			c := fixture.Example(t, "compact-ipv4.yaml")
			c.Spec.OpenShiftRelease = r.String()
			files, err := bundle.Build(c, bundle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(files, func(f bundle.File) bool { return f.Path == bundle.DisruptionPolicyPath })
			warning := bundle.RebootWarning(r)
			var got string
			switch {
			case i >= 0 && warning == "":
				got = string(files[i].Data)
			case i < 0 && warning != "":
				got = "no " + bundle.DisruptionPolicyPath + "; warning: " + warning + "\n"
			default:
				t.Fatalf("%s written: %v, warning %q: want exactly one of them", bundle.DisruptionPolicyPath, i >= 0, warning)
			}
			golden.Assert(t, "openshift-"+r.String(), []byte(got))
		})
	}
}

// TestEveryFileHasADisruptionDecision: every file a MachineConfig of
// vipctl lays down, for every example and role, with and without a
// bootstrap node list, is either in the policy (no reboot) or among the
// files left to reboot, never neither: a file added to the
// MachineConfigs without a decision would fail here rather than reboot
// every node unannounced. And every path either list names is one some
// example lays down, so neither list holds a misspelt path.
func TestEveryFileHasADisruptionDecision(t *testing.T) {
	t.Parallel()
	noReboot, err := bundle.NoRebootFiles()
	if err != nil {
		t.Fatal(err)
	}
	decided := map[string]string{}
	for _, f := range noReboot {
		decided[f.Path] = "no reboot"
	}
	for _, f := range bundle.RebootFiles {
		if _, twice := decided[f.Path]; twice {
			t.Errorf("%s is both in the policy and left to reboot", f.Path)
		}
		decided[f.Path] = "reboot"
	}
	for _, f := range append(noReboot, bundle.RebootFiles...) {
		if f.Why == "" {
			t.Errorf("%s: no reason given", f.Path)
		}
	}
	master := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "master-0", Labels: map[string]string{"node-role.kubernetes.io/master": ""}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}},
	}
	laid := map[string]bool{}
	for _, e := range fixture.Examples(t) {
		c := fixture.Example(t, e)
		for _, opts := range []bundle.Options{{}, {BootstrapNodes: []corev1.Node{master}}} {
			for _, role := range bundle.Roles {
				files, err := bundle.RoleFiles(c, role, opts)
				if err != nil {
					t.Fatalf("%s %s: %v", e, role, err)
				}
				for _, f := range files {
					laid[f.Path] = true
					if _, ok := decided[f.Path]; !ok {
						t.Errorf("%s, role %s: %s has no node disruption decision (bundle.NoRebootFiles or bundle.RebootFiles)", e, role, f.Path)
					}
				}
			}
		}
	}
	var unused []string
	for p := range decided {
		if !laid[p] {
			unused = append(unused, p)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("no example lays down %s", strings.Join(unused, ", "))
	}
}

// TestDisruptionPolicyLeavesRoom: vipctl's entries share the
// MachineConfiguration's 50 with everyone else's; a handful is its fair
// share.
func TestDisruptionPolicyLeavesRoom(t *testing.T) {
	t.Parallel()
	p, err := bundle.DisruptionPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Paths()); n > 10 {
		t.Errorf("the policy takes %d of the cluster's 50 file entries: %s", n, fmt.Sprint(p.Paths()))
	}
}
