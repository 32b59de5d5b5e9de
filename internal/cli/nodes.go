package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/nodelist"
)

type nodesOptions struct {
	installer   nodelist.Installer
	fromCluster bool
	kubeconfig  string
	output      string
}

// NewNodesCommand writes the node list `render --nodes` reads, from the
// installer's files or from the cluster.
func NewNodesCommand(streams IOStreams) *cobra.Command {
	o := &nodesOptions{}
	cmd := &cobra.Command{
		Use:   "nodes (--install-config FILE [--agent-config FILE] | --from-cluster)",
		Short: "Write the node list render --nodes reads, from the installer's files or the cluster",
		Long: `Writes a NodeList to stdout with what vipctl render --nodes reads of each
node: its name, role labels and addresses (docs/render.md, "The bootstrap
node list").

Before the cluster exists, from the installer's files: the hosts of
install-config.yaml (platform.baremetal.hosts: name, role, the static
addresses of networkConfig) or, with --agent-config, of the agent-based
installer's agent-config.yaml (hostname, role, networkConfig), each with its
addresses inside install-config's networking.machineNetwork. A Node is
named after its host's hostname: check that the names are the ones the
Nodes will have.

With --from-cluster, every Node of the cluster the kubeconfig names, under
its real name.`,
		Example: `  vipctl nodes --install-config install-config.yaml > nodes.yaml
  vipctl nodes --install-config install-config.yaml --agent-config agent-config.yaml > nodes.yaml
  vipctl nodes --from-cluster -o json > nodes.json
  vipctl render -f cluster.yaml --nodes nodes.yaml --out-dir out/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != outputYAML && o.output != outputJSON {
				return fmt.Errorf("--output: unknown format %q (yaml or json)", o.output)
			}
			var nodes []corev1.Node
			switch {
			case o.installer.AgentConfig != "" && o.installer.InstallConfig == "":
				return errors.New("--agent-config: give --install-config too: it holds the machine networks")
			case o.fromCluster == (o.installer.InstallConfig != ""):
				return errors.New("give --install-config (with --agent-config for the agent-based installer) or --from-cluster")
			case o.fromCluster:
				cfg, err := restConfig(o.kubeconfig)
				if err != nil {
					return err
				}
				kube, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					return err
				}
				var skipped []error
				if nodes, skipped, err = nodelist.FromCluster(cmd.Context(), kube); err != nil {
					return fmt.Errorf("listing Nodes: %w", err)
				}
				for _, e := range skipped {
					_, _ = fmt.Fprintf(streams.ErrOut, "warning: left out %v\n", e)
				}
			default:
				var notes []string
				var err error
				if nodes, notes, err = nodelist.FromInstaller(o.installer); err != nil {
					return err
				}
				for _, n := range notes {
					_, _ = fmt.Fprintln(streams.ErrOut, "note:", n)
				}
			}
			return printData(streams.Out, o.output, cluster.NewSlimNodeList(nodes), nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.installer.InstallConfig, "install-config", "", "the installer's install-config.yaml")
	f.StringVar(&o.installer.AgentConfig, "agent-config", "", "the agent-based installer's agent-config.yaml (its hosts, instead of install-config's)")
	f.BoolVar(&o.fromCluster, "from-cluster", false, "list the Nodes of the cluster the kubeconfig names")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --from-cluster: kubeconfig (default $KUBECONFIG, then ~/.kube/config)")
	f.StringVarP(&o.output, "output", "o", outputYAML, "output format: yaml or json")
	return cmd
}
