package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/status"
)

// NewStatusCommand shows which node holds which VIP.
func NewStatusCommand(streams IOStreams) *cobra.Command {
	var file, kubeconfig, namespace, output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status [-f cluster.yaml] [-o text|json|yaml] [--watch]",
		Short: "Show every VIP, its holder, state and the Services using it, and the nodes' BGP sessions",
		Long: `Reads the live config (the vipctl-config ConfigMap, or -f), the VIPs each
node's sidecar publishes in its vipctl.io/vips annotation, and the Services'
allocated addresses, and the BGP sessions the nodes publish in their
vipctl.io/bgp-sessions annotation (bgp pools). When the cluster has the
ClusterVIPs object of the config's name, its status's conditions follow
the table (-o json|yaml: "object"). Exits 2 when a VIP has no holder or
several (split brain), or a BGP session is not Established.

With --watch it shows the table again whenever what it shows changes (-o
json: one JSON object per line and change), until interrupted (exit 0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(checkOutput(output), checkNamespace(namespace)); err != nil {
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
			} else {
				src, err := cl.LiveSource(ctx)
				c = src.Config
				unknown := src.Unknown
				if err != nil {
					return fmt.Errorf("reading the live config: %w", err)
				} else if c == nil {
					return fmt.Errorf("no ConfigMap %s/%s: pass -f cluster.yaml", namespace, v1alpha1.ConfigMapName)
				}
				if len(unknown) > 0 {
					_, _ = fmt.Fprintf(streams.ErrOut, "warning: configmap %s/%s: %s\n", namespace, v1alpha1.ConfigMapName, unknown)
				}
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
			if watch {
				// The reads above have shown the API answers and allows
				// them; the informers retry through outages from here on.
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				o := status.WatchOptions{Kube: cl.Kube, Dynamic: cl.Dynamic, Namespace: namespace, Config: c}
				if file == "" {
					o.Config = nil // follow the ConfigMap
				}
				fw := frameWriter{streams: streams, format: output, terminal: isTerminal(streams.Out)}
				return status.Watch(ctx, o, fw.write)
			}
			report, errs := status.NewReport(c, nodes, svcs)
			if report.Object, err = status.ReadObject(ctx, cl.Dynamic, c.Metadata.Name); err != nil {
				errs = append(errs, err)
			}
			if reach, err := status.NodeReach(ctx, cl.Kube); err != nil {
				errs = append(errs, err)
			} else {
				report.Classify(reach, time.Now())
			}
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
	f.StringVar(&namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap")
	f.BoolVarP(&watch, "watch", "w", false, "show the status again whenever it changes, until interrupted")
	addOutputFlag(cmd, &output)
	markNonEmpty(cmd, "file")
	return cmd
}

// frameWriter prints the frames of `status --watch`.
type frameWriter struct {
	streams IOStreams
	format  string
	// terminal: each table replaces the last on the screen; otherwise
	// (a file, a pipe) they follow each other, each under its time.
	terminal bool
	n        int
}

func (w *frameWriter) write(f status.Frame) error {
	defer func() { w.n++ }()
	for _, warning := range f.Warnings {
		_, _ = fmt.Fprintln(w.streams.ErrOut, "warning:", warning)
	}
	out := w.streams.Out
	switch w.format {
	case outputJSON:
		// One compact object per line: `| jq` reads each as it comes.
		b, err := json.Marshal(f.Report)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(f.Report)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "---\n%s", b)
		return err
	}
	var b strings.Builder
	switch {
	case w.terminal:
		b.WriteString("\x1b[H\x1b[2J") // cursor home, clear the screen
	case w.n > 0:
		b.WriteString("\n")
	}
	now := time.Now()
	fmt.Fprintf(&b, "%s\n\n%s", now.UTC().Format(time.RFC3339), f.Report.Text(now))
	if len(f.Drained) > 0 {
		fmt.Fprintf(&b, "\ndrained (vipctl undrain NODE ends it): %s\n", strings.Join(f.Drained, ", "))
	}
	if p := f.Report.Problems(); len(p) > 0 {
		fmt.Fprintf(&b, "\nproblems: %s\n", strings.Join(p, "; "))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// isTerminal tells whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
