package update

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestDrainArgsValidate: drain's and undrain's NODE and --timeout are
// refused before the cluster is asked, naming the argument or flag.
func TestDrainArgsValidate(t *testing.T) {
	t.Parallel()
	const nameRule = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	cases := []struct {
		name string
		a    DrainArgs
		want string
	}{
		{"a node", DrainArgs{Command: "drain", Node: "master-0.ocp4.example.com"}, ""},
		{"--wait with a timeout", DrainArgs{Command: "drain", Node: "master-0", Wait: true, Timeout: time.Minute}, ""},
		{"drain \"\"", DrainArgs{Command: "drain", Node: ""}, `NODE "": empty: the Node's name (vipctl drain NODE, as oc get nodes names it)`},
		{"undrain \"\"", DrainArgs{Command: "undrain", Node: ""}, `NODE "": empty: the Node's name (vipctl undrain NODE, as oc get nodes names it)`},
		{"a path", DrainArgs{Command: "drain", Node: "../master-0"}, `NODE "../master-0": not a Node name: ` + nameRule + " (vipctl drain NODE, as oc get nodes names it)"},
		{"upper case", DrainArgs{Command: "undrain", Node: "Master-0"}, `NODE "Master-0": not a Node name: ` + nameRule + " (vipctl undrain NODE, as oc get nodes names it)"},
		{"--timeout without --wait", DrainArgs{Command: "drain", Node: "master-0", Timeout: time.Minute, TimeoutSet: true}, "--timeout needs --wait"},
		{"a negative --timeout", DrainArgs{Command: "drain", Node: "master-0", Wait: true, Timeout: -time.Second, TimeoutSet: true},
			"--timeout -1s: must be positive: how long --wait waits for every VIP to move"},
		{"a zero --timeout", DrainArgs{Command: "drain", Node: "master-0", Wait: true, TimeoutSet: true},
			"--timeout 0s: must be positive: how long --wait waits for every VIP to move"},
		{"both at once", DrainArgs{Command: "drain", Node: "", Wait: true, TimeoutSet: true},
			"NODE \"\": empty: the Node's name (vipctl drain NODE, as oc get nodes names it)\n--timeout 0s: must be positive: how long --wait waits for every VIP to move"},
	}
	for _, tc := range cases {
		if got := fixture.ErrText(tc.a.Validate()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
