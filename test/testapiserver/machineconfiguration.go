package testapiserver

import (
	"path/filepath"
	"testing"
)

// MachineConfigurationCRD is the path of the CRD of the Machine Config
// Operator's MachineConfiguration (operator.openshift.io/v1, which holds
// the node disruption policies) shipped in the openshift/api module.
func MachineConfigurationCRD(t testing.TB) string {
	t.Helper()
	dir, err := moduleDir("github.com/openshift/api")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "operator", "v1", "zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigurations.crd.yaml")
}
