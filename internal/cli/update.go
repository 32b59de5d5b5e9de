package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/update"
)

// connect reaches the API for update and status.
func connect(kubeconfig, namespace string) (update.Cluster, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return update.Cluster{}, err
	}
	cfg.UserAgent = "vipctl"
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
		dryRun, force                       bool
		add, remove, set                    []string
	)
	cmd := &cobra.Command{
		Use:   "update -f cluster.yaml [--add-pool NAME=CIDR|RANGE[,...]] [--remove-pool NAME] [--set-pool NAME=...] [--dry-run] [--force]",
		Short: "Apply day-2 service-pool edits to a live cluster, without node reboots",
		Long: `Compares the file (after any quick edits) with the live vipctl-config
ConfigMap and prints the plan: pools added, removed and changed, the VRRP IDs
new pools get, Services whose addresses no pool would contain any more, and
whether static parts changed (then new MachineConfigs are written and the
Machine Config Operator reboots the nodes). An edit that would orphan
addresses is refused unless --force, which releases them. The ConfigMap is
written with optimistic concurrency: a concurrent edit fails, it is not
overwritten. Quick edits also rewrite the file (atomically; only the lines an
edit concerns change, comments and layout stay). Nothing is written with
--dry-run or on any error.`,
		Example: `  vipctl update -f cluster.yaml --add-pool web=198.51.100.128/26 --dry-run
  vipctl update -f cluster.yaml --set-pool web=198.51.100.128/26,198.51.100.200-198.51.100.220
  vipctl update -f cluster.yaml --remove-pool old --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := v1alpha1.Load(file)
			if err != nil {
				return err
			}
			var edits []update.Edit
			for _, s := range add {
				edits = append(edits, update.Edit{Op: "add", Spec: s})
			}
			for _, s := range set {
				edits = append(edits, update.Edit{Op: "set", Spec: s})
			}
			for _, s := range remove {
				edits = append(edits, update.Edit{Op: "remove", Spec: s})
			}
			var edited []byte
			if len(edits) > 0 {
				original, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				if edited, c, err = update.ApplyEdits(original, edits); err != nil {
					return err
				}
			}
			cl, err := connect(kubeconfig, namespace)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if w := cl.ReleaseWarning(ctx, c); w != "" {
				_, _ = fmt.Fprintln(streams.ErrOut, "warning:", w)
			}
			live, cm, err := cl.Live(ctx)
			if err != nil {
				return fmt.Errorf("reading the live config: %w", err)
			}
			svcs, err := cl.Services(ctx)
			if err != nil {
				return err
			}
			plan, err := update.Compute(live, c, svcs)
			if err != nil {
				return err
			}
			if err := printData(streams.Out, output, plan, func(w io.Writer) error {
				_, err := io.WriteString(w, plan.Text())
				return err
			}); err != nil {
				return err
			}
			if dryRun || plan.Empty() {
				if len(edits) > 0 && !dryRun {
					return update.WriteFile(file, edited)
				}
				return nil
			}
			if err := cl.Apply(ctx, plan, cm, force, streams.ErrOut); err != nil {
				return err
			}
			if len(edits) > 0 {
				if err := update.WriteFile(file, edited); err != nil {
					return fmt.Errorf("the cluster is updated but %s could not be rewritten: %w", file, err)
				}
				_, _ = fmt.Fprintf(streams.ErrOut, "rewrote %s\n", file)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "ClusterVIPs file")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&namespace, "namespace", render.Namespace, "namespace of the vipctl ConfigMap")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan, change nothing")
	f.BoolVar(&force, "force", false, "release addresses the edit takes from Services")
	f.StringArrayVar(&add, "add-pool", nil, "add a pool: NAME=CIDR|RANGE[,...]")
	f.StringArrayVar(&remove, "remove-pool", nil, "remove a pool: NAME")
	f.StringArrayVar(&set, "set-pool", nil, "replace a pool's addresses: NAME=CIDR|RANGE[,...]")
	addOutputFlag(cmd, &output)
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
