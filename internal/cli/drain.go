package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/render"
)

// NewDrainCommand asks a node's sidecar to give its VIPs away.
func NewDrainCommand(streams IOStreams) *cobra.Command {
	return drainCommand(streams, true, "drain NODE", "Move every VIP off a node without a failed request, until undrain",
		`Sets the annotation vipctl.io/drain=true on the Node. The node's runtimecfg
sidecar then does what keepalived's preStop hook does before a planned stop:
it keeps the VIPs the node holds answering locally, drops every VRRP
instance to priority 1, and a peer takes each VIP over while the node still
answers (make-before-break). The node stays drained (across pod restarts,
once its sidecar has synced) until vipctl undrain. Run it before oc adm
drain and a reboot; vipctl status lists drained nodes.`)
}

// NewUndrainCommand ends a drain started by vipctl drain.
func NewUndrainCommand(streams IOStreams) *cobra.Command {
	return drainCommand(streams, false, "undrain NODE", "End a vipctl drain: the node takes its preferred VIPs back",
		`Removes the annotation vipctl.io/drain from the Node. The node's sidecar
restores its priorities, and it preempts the peers holding the VIPs it is
preferred for; their handover tables keep open connections answered.`)
}

func drainCommand(streams IOStreams, drain bool, use, short, long string) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := connect(kubeconfig, render.Namespace)
			if err != nil {
				return err
			}
			if err := cl.SetDrain(cmd.Context(), args[0], drain); err != nil {
				return err
			}
			what := "drain asked: its sidecar hands the VIPs over (vipctl status shows where they went)"
			if !drain {
				what = "undrain asked: it takes its preferred VIPs back"
			}
			_, err = fmt.Fprintf(streams.Out, "node %s: %s\n", args[0], what)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	return cmd
}
