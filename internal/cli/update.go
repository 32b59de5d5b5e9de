package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/update"
)

// connect reaches the API for update and status.
func connect(kubeconfig, namespace string) (update.Cluster, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return update.Cluster{}, err
	}
	cfg.UserAgent = "vipctl"
	// client-go's default (5 per second, bursts of 10) makes update's
	// three dozen reads and dry runs of the rendered objects wait seconds
	// for nothing; kubectl allows as much.
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return update.Cluster{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return update.Cluster{}, err
	}
	return update.Cluster{Kube: kube, Dynamic: dyn, Namespace: namespace}, nil
}

// NewUpdateCommand edits service pools on a live cluster.
func NewUpdateCommand(streams IOStreams) *cobra.Command {
	var (
		file, kubeconfig, namespace, output string
		nodes                               string
		dryRun, force                       bool
		add, remove, set, setMode           []string
	)
	cmd := &cobra.Command{
		Use:   "update -f cluster.yaml [--add-pool NAME=CIDR|RANGE[,...]] [--remove-pool NAME] [--set-pool NAME=...] [--set-pool-mode NAME=vrrp|bgp] [--dry-run] [--force]",
		Short: "Apply day-2 service-pool edits to a live cluster, without node reboots",
		Long: `Compares the file (after any quick edits) with the live vipctl-config
ConfigMap and prints the plan: pools added, removed and changed (a move
between vrrp and bgp with the VRRP IDs it frees or takes), the VRRP IDs new
pools get, a changed load-balancer class (spec.loadBalancerClass), Services
whose addresses no pool would contain any more (or that become a pool's
anchor, or whose class vipctl would no longer serve), whether static parts changed (then new MachineConfigs are written and the
Machine Config Operator reboots the nodes), and the other objects of
manifests/vipctl.yaml and manifests/monitoring.yaml that differ from the
file (the allocator's image, RBAC, the alerts), which are applied
server-side; kinds the cluster does not serve are left out with a note. An edit that would orphan addresses
is refused unless --force, which releases them; so are MachineConfigs the
cluster's release cannot parse (its ClusterVersion older than
spec.openshiftRelease). Every write carries the resourceVersion read for
the plan: a concurrent edit fails, it is not overwritten. Quick edits also rewrite the file (atomically; only the lines an
edit concerns change, comments and layout stay). Nothing is written with
--dry-run or on any error.`,
		Example: `  vipctl update -f cluster.yaml --add-pool web=198.51.100.128/26 --dry-run
  vipctl update -f cluster.yaml --set-pool web=198.51.100.128/26,198.51.100.200-198.51.100.220
  vipctl update -f cluster.yaml --set-pool-mode web=bgp --dry-run
  vipctl update -f cluster.yaml --remove-pool old --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(checkOutput(output), checkNamespace(namespace)); err != nil {
				return err
			}
			var edits []update.Edit
			for _, s := range add {
				edits = append(edits, update.Edit{Op: "add", Spec: s})
			}
			for _, s := range set {
				edits = append(edits, update.Edit{Op: "set", Spec: s})
			}
			for _, s := range setMode {
				edits = append(edits, update.Edit{Op: "mode", Spec: s})
			}
			for _, s := range remove {
				edits = append(edits, update.Edit{Op: "remove", Spec: s})
			}
			// The file and its edits are checked before the cluster is
			// reached: a bad edit fails the same with or without one.
			req, err := update.Load(file, edits)
			if err != nil {
				return err
			}
			var bootstrap []corev1.Node
			if nodes != "" {
				list, err := nodelist.Input{Path: nodes, Config: req.Config, ConfigPath: file, Interface: req.Config.Spec.VRRP.Interface}.Load()
				if err != nil {
					return fmt.Errorf("--nodes: %w", err)
				}
				bootstrap = list.Objects
			}
			cl, err := connect(kubeconfig, namespace)
			if err != nil {
				return err
			}
			warnUnpublishedImage(streams.ErrOut, req.Config)
			return cl.Run(cmd.Context(), req, update.RunOptions{
				DryRun: dryRun, Force: force, Log: streams.ErrOut, BootstrapNodes: bootstrap,
				Show: func(plan *update.Plan) error {
					return printData(streams.Out, output, plan, func(w io.Writer) error {
						_, err := io.WriteString(w, plan.Text())
						return err
					})
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "ClusterVIPs file")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap")
	f.StringVar(&nodes, "nodes", "", "NodeList (vipctl nodes, oc get nodes -o yaml) whose control-plane nodes rewritten MachineConfigs ship as the bootstrap node list (default: the live cluster's Nodes)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan, change nothing")
	f.BoolVar(&force, "force", false, "release addresses the edit takes from Services; write MachineConfigs the cluster's release cannot parse")
	f.StringArrayVar(&add, "add-pool", nil, "add a pool: NAME=CIDR|RANGE[,...]")
	f.StringArrayVar(&remove, "remove-pool", nil, "remove a pool: NAME")
	f.StringArrayVar(&set, "set-pool", nil, "replace a pool's addresses: NAME=CIDR|RANGE[,...]")
	f.StringArrayVar(&setMode, "set-pool-mode", nil, "move a pool between VRRP and BGP: NAME=vrrp|bgp (spec.bgp must be on the nodes already, docs/bgp.md)")
	addOutputFlag(cmd, &output)
	_ = cmd.MarkFlagRequired("file")
	markNonEmpty(cmd, "nodes")
	return cmd
}
