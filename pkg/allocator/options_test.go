package allocator

import (
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestOptionsValidate: the allocator's flags are refused before the
// cluster is asked, naming the flag, every problem at once.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	good := func() Options {
		return Options{Namespace: "vipctl", Identity: "allocator-0", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	}
	with := func(edit func(*Options)) Options {
		o := good()
		edit(&o)
		return o
	}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"the defaults", good(), ""},
		{"--namespace \"\"", with(func(o *Options) { o.Namespace = "" }), `--namespace "": empty: the namespace of the vipctl-config ConfigMap`},
		{"--namespace not a name", with(func(o *Options) { o.Namespace = "vipctl/x" }),
			`--namespace "vipctl/x": not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"--id \"\"", with(func(o *Options) { o.Identity = "" }), "--id: empty: this replica's name in the Lease (default $POD_NAME, then the host name)"},
		{"a negative --retry-period", with(func(o *Options) { o.RetryPeriod = -time.Second }), "--retry-period -1s: must be positive"},
		{"the Lease shorter than the renewal", with(func(o *Options) { o.LeaseDuration = 10 * time.Second }),
			"--lease-duration 10s: must be longer than --renew-deadline 10s: a leader must give up before its Lease runs out"},
		{"renewal too short for the retries", with(func(o *Options) { o.RetryPeriod = 9 * time.Second }),
			"--renew-deadline 10s: must be longer than 1.2 × --retry-period 9s: a leader must get to try renewing"},
		{"every problem at once", with(func(o *Options) { o.Namespace, o.LeaseDuration = "", 0 }),
			"--namespace \"\": empty: the namespace of the vipctl-config ConfigMap\n--lease-duration 0s: must be positive\n--lease-duration 0s: must be longer than --renew-deadline 10s: a leader must give up before its Lease runs out"},
	}
	for _, tc := range cases {
		if got := fixture.ErrText(tc.o.Validate()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
