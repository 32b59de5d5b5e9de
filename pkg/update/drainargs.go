package update

import (
	"errors"
	"fmt"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
)

// DrainArgs are what `vipctl drain` and `vipctl undrain` are given.
type DrainArgs struct {
	// Command is "drain" or "undrain", for messages.
	Command string
	// Node is the NODE argument.
	Node string
	// Wait and Timeout are drain's --wait and --timeout; TimeoutSet says
	// --timeout was given.
	Wait       bool
	Timeout    time.Duration
	TimeoutSet bool
}

// Validate checks the arguments before the cluster is asked, naming the
// argument or flag of each problem, all at once: an empty NODE used to
// reach the API as a request for no Node at all.
func (a DrainArgs) Validate() error {
	var errs []error
	if msg := cluster.NodeNameError(a.Node); msg != "" {
		errs = append(errs, fmt.Errorf("NODE %q: %s (vipctl %s NODE, as oc get nodes names it)", a.Node, msg, a.Command))
	}
	if a.TimeoutSet && !a.Wait {
		errs = append(errs, errors.New("--timeout needs --wait"))
	}
	if a.Wait && a.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive: how long --wait waits for every VIP to move", a.Timeout))
	}
	return errors.Join(errs...)
}
