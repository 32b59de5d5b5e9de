package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/status"
)

// NewStatusCommand shows which node holds which VIP.
func NewStatusCommand(streams IOStreams) *cobra.Command {
	var file, kubeconfig, namespace, output string
	cmd := &cobra.Command{
		Use:   "status [-f cluster.yaml] [-o text|json|yaml]",
		Short: "Show every VIP, its holder, state and the Services using it, and the nodes' BGP sessions",
		Long: `Reads the live config (the vipctl-config ConfigMap, or -f), the VIPs each
node's sidecar publishes in its vipctl.io/vips annotation, and the Services'
allocated addresses, and the BGP sessions the nodes publish in their
vipctl.io/bgp-sessions annotation (bgp pools). Exits 2 when a VIP has no
holder or several (split brain), or a BGP session is not Established.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := connect(kubeconfig, namespace)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var c *v1alpha1.ClusterVIPs
			if file != "" {
				if c, err = v1alpha1.Load(file); err != nil {
					return err
				}
			} else if c, _, err = cl.Live(ctx); err != nil {
				return fmt.Errorf("reading the live config: %w", err)
			} else if c == nil {
				return fmt.Errorf("no ConfigMap %s/%s: pass -f cluster.yaml", namespace, v1alpha1.ConfigMapName)
			}
			if w := cl.ReleaseWarning(ctx, c); w != "" {
				_, _ = fmt.Fprintln(streams.ErrOut, "warning:", w)
			}
			nodes, err := cl.Nodes(ctx)
			if err != nil {
				return err
			}
			svcs, err := cl.Services(ctx)
			if err != nil {
				return err
			}
			report, errs := status.NewReport(c, nodes, svcs)
			for _, e := range errs {
				_, _ = fmt.Fprintln(streams.ErrOut, "warning:", e)
			}
			if err := printData(streams.Out, output, report, func(w io.Writer) error {
				_, err := io.WriteString(w, report.Text(time.Now()))
				return err
			}); err != nil {
				return err
			}
			if drained := status.Drained(nodes); len(drained) > 0 && output == outputText {
				_, _ = fmt.Fprintf(streams.Out, "\ndrained (vipctl undrain NODE ends it): %s\n", strings.Join(drained, ", "))
			}
			return findings(report.Problems())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "ClusterVIPs file (default: the live ConfigMap)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&namespace, "namespace", render.Namespace, "namespace of the vipctl ConfigMap")
	addOutputFlag(cmd, &output)
	return cmd
}
