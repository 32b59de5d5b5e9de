package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/installercheck"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/vrid"
)

type validateOptions struct {
	file      string
	output    string
	nodes     string
	installer nodelist.Installer
}

// NewValidateCommand checks a ClusterVIPs file and prints it with every
// default filled in (-o yaml), or a one-line summary.
func NewValidateCommand(streams IOStreams) *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate -f FILE [--nodes NODES.yaml] [--install-config FILE [--agent-config FILE]]",
		Short: "Check a ClusterVIPs file; -o yaml prints it with defaults applied",
		Long: `Checks a ClusterVIPs file: every problem at once, each with its field path.
With --nodes also against a node list, as render --nodes does; with
--install-config (and --agent-config) also against the installer's files:
the platform and its load balancer, the cluster's name, domain, VIPs and
machine networks, the agent hosts and the rendezvous host
(docs/validate.md).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			if err := checkInstallerFlags(o.installer); err != nil {
				return err
			}
			c, err := v1alpha1.Load(o.file)
			if err != nil {
				return err
			}
			// What render refuses, validate refuses too: reserved
			// addresses in pools, VRRP IDs that cannot be assigned
			// (OpenShift's API ID avoided without a pin), and with
			// --nodes what no node could hold or a node lacks.
			var list cluster.NodeListFile
			if o.nodes != "" {
				if list, err = (nodelist.Input{Path: o.nodes, Config: c, ConfigPath: o.file, Interface: c.Spec.VRRP.Interface}).Load(); err != nil {
					return fmt.Errorf("--nodes: %w", err)
				}
			}
			if err := checkInstaller(o.installer, installercheck.Input{Config: c, ConfigPath: o.file, Nodes: list.Nodes, NodesPath: o.nodes}); err != nil {
				return err
			}
			if errs := v1alpha1.ValidateNodes(c, cluster.Addresses(list.Nodes)); len(errs) > 0 {
				return fmt.Errorf("%s: %w", o.file, &v1alpha1.ValidationError{Errors: errs})
			}
			ids, err := vrid.ForCluster(c)
			if err != nil {
				return fmt.Errorf("%s: spec.vrrp: %w", o.file, err)
			}
			if len(list.Nodes) > 0 {
				if _, err := bundle.NodePlan(c, ids, cluster.State{Nodes: list.Nodes}); err != nil {
					return fmt.Errorf("%s: %w", o.file, err)
				}
			}
			return printData(streams.Out, o.output, c, func(w io.Writer) error {
				vips := len(c.Spec.API.VIPs) + len(c.Spec.API.InternalVIPs)
				for _, in := range c.Spec.Ingress {
					vips += len(in.VIPs)
				}
				_, err := fmt.Fprintf(w, "%s: valid (cluster %s; API and ingress VIPs: %d; service pools: %d; VRRP instance keys: %d)\n",
					o.file, c.Metadata.Name, vips, len(c.Spec.ServicePools), len(c.InstanceKeys()))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "ClusterVIPs file")
	cmd.Flags().StringVar(&o.nodes, "nodes", "", "NodeList (vipctl nodes, oc get nodes -o yaml) to check the config against, as render --nodes does")
	addInstallerFlags(cmd, &o.installer)
	_ = cmd.MarkFlagRequired("file")
	markNonEmpty(cmd, "nodes")
	addOutputFlag(cmd, &o.output)
	return cmd
}
