package preflight

import (
	"errors"
	"fmt"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Validate checks the options on their own, naming the flag of each
// problem, all at once, before a packet is sent: with no wait for answers
// every address would look free. An empty Interface is left to the
// command's default (spec.vrrp.interface).
func (o Options) Validate() error {
	var errs []error
	if o.Interface != "" {
		if msg := v1alpha1.InterfaceNameError(o.Interface); msg != "" {
			errs = append(errs, fmt.Errorf("--interface %q: %s", o.Interface, msg))
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive: how long answers are awaited after the last request (default %s)", o.Timeout, DefaultTimeout))
	}
	return errors.Join(errs...)
}
