package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/update"
)

// NewMigrateCommand makes the ClusterVIPs object the live config.
func NewMigrateCommand(streams IOStreams) *cobra.Command {
	var (
		kubeconfig, namespace string
		revert                bool
		wait                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate [--kubeconfig FILE] [--wait 5m] [--revert]",
		Short: "Make the ClusterVIPs object, not the ConfigMap, the live config (no node changes)",
		Long: `Moves a running cluster's live config from the vipctl-config ConfigMap to
its ClusterVIPs custom resource (docs/api.md, "Migration"): installs the
CRD when the cluster lacks it, writes the object named as the cluster with
the ConfigMap's config and the annotation vipctl.io/config-source=true,
then waits until the object's status says every node's sidecar reads it
(each looks for the resource every minute). The config is the same, so no
node changes anything and no request is lost. The ConfigMap stays, kept a
copy of the object by vipctl update, for sidecars older than v0.2.0.

--revert hands the live config back to the ConfigMap (the annotation goes;
the object stays, reported on) and waits until every node reads it.
With --wait 0 it returns once the object is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNamespace(namespace); err != nil {
				return err
			}
			if wait < 0 {
				return errors.New("--wait: must not be negative")
			}
			cl, err := connect(kubeconfig, namespace)
			if err != nil {
				return err
			}
			if err := cl.Migrate(cmd.Context(), update.MigrateOptions{Revert: revert, Wait: wait, Log: streams.ErrOut}); err != nil {
				return err
			}
			_, err = fmt.Fprintln(streams.Out, "done")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap")
	f.BoolVar(&revert, "revert", false, "hand the live config back to the ConfigMap")
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for every node to follow (0: do not wait)")
	return cmd
}
