package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/dnsrecords"
)

// NewDNSCommand groups what vipctl does about the cluster's DNS records.
func NewDNSCommand(streams IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "The DNS records the cluster's VIPs need (vipctl render writes them)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDNSCheckCommand(streams))
	return cmd
}

type dnsCheckOptions struct {
	file    string
	server  string
	timeout time.Duration
	output  string
}

func newDNSCheckCommand(streams IOStreams) *cobra.Command {
	o := &dnsCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check -f cluster.yaml [--server IP[:PORT]] [-o text|json|yaml]",
		Short: "Ask a DNS server for every record the VIPs need and report each missing or wrong one",
		Long: `Asks the DNS server, A and AAAA each, for api.<cluster>.<baseDomain>,
api-int.<cluster>.<baseDomain> and, for every IngressController, a name
under its domain's wildcard (` + dnsrecords.WildcardProbe + `.apps.<cluster>.<baseDomain>), the
records vipctl render writes to DIR/dns/. Each answer must be exactly the
VIPs of its family: a missing record, another address, an address of a
family the config has no VIP of (clients that prefer IPv6 would go there)
or an error code from the server is a finding, and the command exits 2.
It exits 1 when the server does not answer at all.

Without --server it asks the first nameserver of /etc/resolv.conf: run it
on a host that resolves the way the nodes will (docs/dns.md), before
openshift-install.`,
		Example: `  vipctl dns check -f cluster.yaml
  vipctl dns check -f cluster.yaml --server 198.51.100.53 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			opts := dnsrecords.CheckOptions{Server: o.server, Timeout: o.timeout}
			if err := opts.Validate(); err != nil {
				return err
			}
			c, err := v1alpha1.Load(o.file)
			if err != nil {
				return err
			}
			report, err := dnsrecords.Check(cmd.Context(), c, opts)
			if err != nil {
				return err
			}
			if err := printReport(streams.Out, o.output, report, report.Text()); err != nil {
				return err
			}
			return findings(report.Problems())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "ClusterVIPs file")
	f.StringVar(&o.server, "server", "", "DNS server to ask, IP or IP:PORT (default: the first nameserver of /etc/resolv.conf)")
	f.DurationVar(&o.timeout, "timeout", dnsrecords.DefaultTimeout, "how long to wait for each answer (each query is tried twice)")
	addOutputFlag(cmd, &o.output)
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
