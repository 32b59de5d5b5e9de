package machineconfig

import (
	"fmt"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
)

func TestBuildDisruptionPolicyRefuses(t *testing.T) {
	t.Parallel()
	none := operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.NoneSpecAction}
	tooMany := make([]NoReboot, MaxPolicyFiles+1)
	for i := range tooMany {
		tooMany[i] = NoReboot{Path: fmt.Sprintf("/etc/vipctl/f%d", i), Action: none}
	}
	tests := []struct {
		name  string
		files []NoReboot
		want  string
	}{
		{"relative path", []NoReboot{{Path: "etc/vipctl/cluster.yaml", Action: none}}, `file "etc/vipctl/cluster.yaml": want a clean absolute path`},
		{"unclean path", []NoReboot{{Path: "/etc/vipctl/../vipctl/cluster.yaml", Action: none}}, `file "/etc/vipctl/../vipctl/cluster.yaml": want a clean absolute path`},
		{"outside /etc and /var", []NoReboot{{Path: "/usr/local/bin/x", Action: none}}, `file "/usr/local/bin/x": the Machine Config Operator writes nothing outside /etc and /var`},
		{"twice", []NoReboot{{Path: "/etc/a", Action: none}, {Path: "/etc/a", Action: none}}, `file "/etc/a": listed more than once`},
		{"unknown action", []NoReboot{{Path: "/etc/a", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: "Special"}}}, `file "/etc/a": action "Special" is not one the Machine Config Operator knows`},
		{"restart without a unit", []NoReboot{{Path: "/etc/a", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.RestartSpecAction}}}, `file "/etc/a": action Restart needs a unit name to restart, and no other`},
		{"restart of no unit type", []NoReboot{{Path: "/etc/a", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.RestartSpecAction, Restart: &operatorv1.RestartService{ServiceName: "chronyd"}}}}, `file "/etc/a": action Restart needs a unit name to restart, and no other`},
		{"none with a unit", []NoReboot{{Path: "/etc/a", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.NoneSpecAction, Reload: &operatorv1.ReloadService{ServiceName: "crio.service"}}}}, `file "/etc/a": action None takes no unit`},
		{"more than the cluster holds", tooMany, "51 files: the MachineConfiguration takes at most 50 for the whole cluster"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := BuildDisruptionPolicy(tc.files)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

func TestBuildDisruptionPolicyAccepts(t *testing.T) {
	t.Parallel()
	files := []NoReboot{
		{Path: "/etc/kubernetes/manifests/vipctl-keepalived.yaml", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.NoneSpecAction}},
		{Path: "/etc/chrony.conf", Action: operatorv1.NodeDisruptionPolicySpecAction{Type: operatorv1.RestartSpecAction, Restart: &operatorv1.RestartService{ServiceName: "chronyd.service"}}},
	}
	p, err := BuildDisruptionPolicy(files)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata.Name != "cluster" || p.Kind != "MachineConfiguration" || p.APIVersion != "operator.openshift.io/v1" {
		t.Errorf("object %s %s %s, want operator.openshift.io/v1 MachineConfiguration cluster", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if got := fmt.Sprint(p.Paths()); got != "[/etc/kubernetes/manifests/vipctl-keepalived.yaml /etc/chrony.conf]" {
		t.Errorf("paths %s", got)
	}
}
