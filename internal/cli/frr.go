package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/frr"
)

// NewFRRCommand runs FRR's daemons in the keepalived pod's frr container.
func NewFRRCommand(streams IOStreams) *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "frr",
		Short: "Run FRR's zebra, bfdd and bgpd for bgp pools (the frr container's main process)",
		Long: `Runs FRR's zebra, bfdd and bgpd in the foreground, the frr container of the
keepalived static pod when spec.bgp is set. bgpd starts from /etc/frr/frr.conf
(the file the runtimecfg sidecar renders and then applies with frr-reload.py
through the vty sockets in /run/frr), or empty while the node announces
nothing. The daemons drop to user frr, log to stdout and open no vty TCP port.
When one of them exits, the others are stopped and vipctl frr exits non-zero,
so the kubelet restarts the container; on SIGTERM they all stop (bgpd tells
its peers, which withdraw the node's routes at once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return frr.Run(ctx, root, streams.Out)
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "prefix of every node path (tests and labs only)")
	_ = cmd.Flags().MarkHidden("root")
	return cmd
}
