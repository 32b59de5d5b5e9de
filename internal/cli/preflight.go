package cli

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/preflight"
)

// NewPreflightCommand checks that no host answers for the config's
// addresses yet.
func NewPreflightCommand(streams IOStreams) *cobra.Command {
	var file, iface, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "preflight -f cluster.yaml [--interface IFACE] [-o text|json|yaml]",
		Short: "Check that no host on the segment answers for a VIP before vipctl takes it",
		Long: `Asks on the interface, as a client would, who has each address of the config:
an ARP request for every IPv4 one, a neighbour solicitation for every IPv6
one (three rounds, 200 ms apart), then listens for --timeout. The API and
ingress VIPs are asked for, and every address of a vrrp pool of at most 1024
addresses (the VRRP anchors only of a larger one; bgp pools are routed, not
held on the segment). Any answer, and any address this host holds itself, is
a finding: exit 2, naming the address, its field and the MAC that answered.

Run it on a host of the machine network after the old load balancer has let
the VIPs go and before the MachineConfigs go in (docs/operations.md, "Cutting
over from another load balancer"). Needs root (CAP_NET_RAW).`,
		Example: `  vipctl preflight -f cluster.yaml --interface br-ex
  vipctl preflight -f cluster.yaml --interface ens3 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := preflight.Options{Interface: iface, Timeout: timeout}
			if err := errors.Join(checkOutput(output), opts.Validate()); err != nil {
				return err
			}
			c, err := v1alpha1.Load(file)
			if err != nil {
				return err
			}
			if opts.Interface == "" {
				opts.Interface = c.Spec.VRRP.Interface
			}
			report, err := preflight.Run(cmd.Context(), c, opts)
			if err != nil {
				return err
			}
			if err := printReport(streams.Out, output, report, report.Text()); err != nil {
				return err
			}
			return findings(report.Problems())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "ClusterVIPs file")
	f.StringVar(&iface, "interface", "", "interface on the VIPs' segment to ask on (default spec.vrrp.interface)")
	f.DurationVar(&timeout, "timeout", preflight.DefaultTimeout, "how long to wait for answers after the last request")
	addOutputFlag(cmd, &output)
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
