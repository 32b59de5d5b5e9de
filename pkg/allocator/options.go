package allocator

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Validate checks the command's options before the cluster is asked,
// naming the flag of each problem, all at once: leader election's own
// check would only fail once the client is up, and an empty namespace
// would be reported as a missing ConfigMap.
func (o Options) Validate() error {
	var errs []error
	if msg := v1alpha1.NamespaceError(o.Namespace); msg != "" {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msg))
	}
	if o.Identity == "" {
		errs = append(errs, errors.New("--id: empty: this replica's name in the Lease (default $POD_NAME, then the host name)"))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--lease-duration", o.LeaseDuration}, {"--renew-deadline", o.RenewDeadline}, {"--retry-period", o.RetryPeriod}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive", d.flag, d.v))
		}
	}
	// client-go's leader election refuses these orders (tools/leaderelection).
	if o.RenewDeadline > 0 && o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("--lease-duration %s: must be longer than --renew-deadline %s: a leader must give up before its Lease runs out", o.LeaseDuration, o.RenewDeadline))
	}
	if o.RetryPeriod > 0 && o.RenewDeadline > 0 && float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
		errs = append(errs, fmt.Errorf("--renew-deadline %s: must be longer than %.1f × --retry-period %s: a leader must get to try renewing", o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod))
	}
	return errors.Join(errs...)
}
