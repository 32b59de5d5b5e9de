// Package cli holds vipctl's cobra commands. Each command parses its flags
// into a small options struct and makes one library call; everything that
// can be tested without a terminal lives in the libraries.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// IOStreams are the command's standard streams, injected so tests can run
// the real root command into buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// StdStreams are the process's own streams.
func StdStreams() IOStreams {
	return IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// ExitError carries a specific exit code for a finding that is not a
// failure of the command itself (a VRRP ID clash, a VIP with no holder).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitFinding is the exit code of a command that ran fine and found a
// problem (clash, VIP without holder), so scripts can tell it from an error.
const ExitFinding = 2

// findings is the outcome of a check that ran: nil when it found nothing,
// otherwise exit 2 naming every problem.
func findings(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &ExitError{Code: ExitFinding, Err: errors.New(strings.Join(problems, "; "))}
}

// NewRootCommand builds the whole command tree.
func NewRootCommand(streams IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "vipctl",
		Short: "Highly available virtual IPs for on-premise clusters",
		Long: `vipctl computes VRRP IDs, renders keepalived and haproxy configuration,
static pods and MachineConfigs for a cluster's API, ingress and
LoadBalancer Service VIPs, and keeps them in step with the cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command's flags, before it runs.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkEmptyFlags(cmd) },
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.AddCommand(
		NewVersionCommand(streams),
		NewValidateCommand(streams),
		NewVRIDsCommand(streams),
		NewRenderCommand(streams),
		NewNodesCommand(streams),
		NewBootstrapCommand(streams),
		NewPreflightCommand(streams),
		NewDNSCommand(streams),
		NewRuntimecfgCommand(streams),
		NewAllocatorCommand(streams),
		NewUpdateCommand(streams),
		NewMigrateCommand(streams),
		NewStatusCommand(streams),
		NewDiagnoseCommand(streams),
		NewDrainCommand(streams),
		NewUndrainCommand(streams),
		NewFRRCommand(streams),
	)
	return root
}

// Main runs the root command and turns its error into an exit code. The
// error is printed here, once.
func Main(args []string, streams IOStreams) int {
	return MainContext(context.Background(), args, streams)
}

// MainContext is Main until ctx ends: commands that run until interrupted
// (status --watch) stop then as on Ctrl-C, which tests cannot send.
func MainContext(ctx context.Context, args []string, streams IOStreams) int {
	root := NewRootCommand(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	_, _ = fmt.Fprintln(streams.ErrOut, "error:", err)
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}
