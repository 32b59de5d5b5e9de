package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/update"
)

// drainPoll is how often drain --wait reads the Nodes again.
const drainPoll = time.Second

// NewDrainCommand asks a node's sidecar to give its VIPs away.
func NewDrainCommand(streams IOStreams) *cobra.Command {
	return drainCommand(streams, true, "drain NODE [--wait [--timeout 2m]]", "Move every VIP off a node without a failed request, until undrain",
		`Sets the annotation vipctl.io/drain=true on the Node. The node's runtimecfg
sidecar then does what keepalived's preStop hook does before a planned stop:
it keeps the VIPs the node holds answering locally, drops every VRRP
instance to priority 1, and a peer takes each VIP over while the node still
answers (make-before-break). The node stays drained (across pod restarts,
once its sidecar has synced) until vipctl undrain. Run it before oc adm
drain and a reboot; vipctl status lists drained nodes.

Without --wait it returns once the Node is annotated. With --wait it
returns when every VIP the node held (as its sidecar publishes them in the
vipctl.io/vips annotation vipctl status reads) is published by another
node and no more by this one, and names where each went; after --timeout
it exits 1 naming the VIPs that did not move. Addresses of bgp pools are
not waited for: every eligible node announces them.`)
}

// NewUndrainCommand ends a drain started by vipctl drain.
func NewUndrainCommand(streams IOStreams) *cobra.Command {
	return drainCommand(streams, false, "undrain NODE", "End a vipctl drain: the node takes its preferred VIPs back",
		`Removes the annotation vipctl.io/drain from the Node. The node's sidecar
restores its priorities, and it preempts the peers holding the VIPs it is
preferred for; their handover tables keep open connections answered.`)
}

func drainCommand(streams IOStreams, drain bool, use, short, long string) *cobra.Command {
	var (
		kubeconfig string
		wait       bool
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			verb := "undrain"
			if drain {
				verb = "drain"
			}
			if err := (update.DrainArgs{Command: verb, Node: node, Wait: wait, Timeout: timeout, TimeoutSet: cmd.Flags().Changed("timeout")}).Validate(); err != nil {
				return err
			}
			cl, err := connect(kubeconfig, onnode.Namespace)
			if err != nil {
				return err
			}
			if drain && wait {
				moved, err := cl.DrainAndWait(cmd.Context(), node, timeout, drainPoll, streams.ErrOut)
				if err != nil {
					return err
				}
				done := "it held no VIP"
				if len(moved) > 0 {
					parts := make([]string, len(moved))
					for i, m := range moved {
						parts[i] = m.String()
					}
					done = "moved " + strings.Join(parts, "; ")
				}
				_, err = fmt.Fprintf(streams.Out, "node %s: drained: %s\n", node, done)
				return err
			}
			if err := cl.SetDrain(cmd.Context(), node, drain); err != nil {
				return err
			}
			what := "drain asked: its sidecar hands the VIPs over (vipctl status shows where they went; --wait waits for it)"
			if !drain {
				what = "undrain asked: it takes its preferred VIPs back"
			}
			_, err = fmt.Fprintf(streams.Out, "node %s: %s\n", node, what)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	if drain {
		f.BoolVar(&wait, "wait", false, "return only when every VIP the node held is held by another node")
		f.DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: how long to wait before exiting 1")
	}
	return cmd
}
