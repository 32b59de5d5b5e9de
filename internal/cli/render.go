package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/installercheck"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

type renderOptions struct {
	file string
	out  string
	// outDeprecated is the same directory given the old way, -o or
	// --output-dir: "-o" names an output format in every other command.
	outDeprecated string
	nodes         string
	iface         string
	release       string
	installer     nodelist.Installer
}

// NewRenderCommand writes MachineConfigs and, with --nodes, every node's
// keepalived/haproxy files into a directory, atomically.
func NewRenderCommand(streams IOStreams) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f FILE --out-dir DIR [--nodes NODES.yaml] [--install-config FILE [--agent-config FILE]]",
		Short: "Render MachineConfigs, static pods and per-node keepalived/haproxy configs",
		Long: `Writes DIR/machineconfigs/*.yaml and DIR/manifests/vipctl.yaml, ready for
oc apply -f, and with --nodes (a NodeList: vipctl nodes, or oc get nodes -o
yaml) DIR/nodes/<node>/... with exactly the files the runtimecfg sidecar
would write on that node, at their paths on the node; the control-plane
MachineConfig then carries the control-plane nodes, so their API VIP comes
up before the API does. DIR is replaced as a whole and atomically: on any
error it is left as it was. (-o, the old name of --out-dir, works for one
more release, with a warning.)

With --install-config (and --agent-config) the cluster file, and the node
list, must agree with the installer's files: the platform and its load
balancer, the cluster's name, domain, VIPs and machine networks, the agent
hosts and the rendezvous host (docs/validate.md, "The installer's files").

The MachineConfigs carry the Ignition spec that --openshift-release (default
spec.openshiftRelease, itself 4.14 by default) parses, which every later
release parses too.`,
		Example: `  vipctl render -f cluster.yaml --out-dir out/
  vipctl nodes --install-config install-config.yaml > nodes.yaml
  vipctl render -f cluster.yaml --out-dir out/ --nodes nodes.yaml --interface br-ex
  vipctl render -f cluster.yaml --out-dir out/ --openshift-release 4.19`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run(streams) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "ClusterVIPs file")
	f.StringVar(&o.out, "out-dir", "", "output directory (replaced atomically)")
	f.StringVarP(&o.outDeprecated, "output-dir", "o", "", "deprecated: use --out-dir")
	_ = f.MarkHidden("output-dir")
	f.StringVar(&o.nodes, "nodes", "", "NodeList (vipctl nodes, oc get nodes -o yaml) to render each node's files")
	f.StringVar(&o.iface, "interface", "", "VRRP interface for nodes without a vipctl.io/interface annotation (default spec.vrrp.interface)")
	f.StringVar(&o.release, "openshift-release", "", "oldest OpenShift release (major.minor) the MachineConfigs must work on (default spec.openshiftRelease)")
	addInstallerFlags(cmd, &o.installer)
	_ = cmd.MarkFlagRequired("file")
	markNonEmpty(cmd, "nodes", "out-dir", "output-dir")
	return cmd
}

// run renders: every input checked before anything is written, the
// output directory replaced atomically.
func (o *renderOptions) run(streams IOStreams) error {
	if err := o.outDir(streams); err != nil {
		return err
	}
	if err := checkInstallerFlags(o.installer); err != nil {
		return err
	}
	// It lands in every listed node's keepalived.conf.
	if msg := v1alpha1.InterfaceNameError(o.iface); o.iface != "" && msg != "" {
		return fmt.Errorf("--interface %q: %s", o.iface, msg)
	}
	// Before the inputs are read: a directory render cannot
	// replace is refused at once.
	if err := bundle.CheckOutDir(o.out); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	c, err := v1alpha1.Load(o.file)
	if err != nil {
		return err
	}
	if o.release != "" {
		if _, err := openshiftrelease.Parse(o.release); err != nil {
			return fmt.Errorf("--openshift-release %q: %w", o.release, err)
		}
		// Into the config, so that the ConfigMap and the node's copy
		// say which release the MachineConfigs were written for.
		c.Spec.OpenShiftRelease = o.release
	}
	check := installercheck.Input{Config: c, ConfigPath: o.file, NodesPath: o.nodes}
	if o.release != "" {
		check.ReleaseFrom = "--openshift-release"
	}
	var opts bundle.Options
	if o.nodes != "" {
		iface := o.iface
		if iface == "" {
			iface = c.Spec.VRRP.Interface
		}
		list, err := nodelist.Input{Path: o.nodes, Config: c, ConfigPath: o.file, Interface: iface}.Load()
		if err != nil {
			return fmt.Errorf("--nodes: %w", err)
		}
		opts.Nodes, opts.BootstrapNodes = list.Nodes, list.Objects
	}
	check.Nodes = opts.Nodes
	if err := checkInstaller(o.installer, check); err != nil {
		return err
	}
	files, err := bundle.Build(c, opts)
	var invalid *v1alpha1.ValidationError
	if errors.As(err, &invalid) {
		return fmt.Errorf("%s: %w", o.file, err) // the file's fields, as validate names them
	}
	if err != nil {
		return err
	}
	warnUnpublishedImage(streams.ErrOut, c)
	for _, w := range bundle.PeerWarnings(c, opts.Nodes) {
		if _, err := fmt.Fprintln(streams.ErrOut, "warning:", w); err != nil {
			return err
		}
	}
	warnReboots(streams.ErrOut, c)
	if err := bundle.WriteDir(o.out, files); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	_, err = fmt.Fprintf(streams.Out, "wrote %d files to %s\n", len(files), o.out)
	return err
}

// warnUnpublishedImage tells, before it is too late, that the pods are
// about to name an image nobody can pull (render and update).
func warnUnpublishedImage(w io.Writer, c *v1alpha1.ClusterVIPs) {
	if msg := c.UnpublishedImageWarning(); msg != "" {
		_, _ = fmt.Fprintln(w, "warning:", msg)
	}
}

// outDir settles the output directory: --out-dir, or for one more
// release -o/--output-dir with a warning, since -o is the output format
// everywhere else.
func (o *renderOptions) outDir(streams IOStreams) error {
	switch {
	case o.outDeprecated == "" && o.out == "":
		return errors.New(`required flag "out-dir" not set`)
	case o.outDeprecated == "":
		return nil
	case o.out != "" && o.out != o.outDeprecated:
		return fmt.Errorf("--out-dir %s and -o %s name different directories: use --out-dir alone", o.out, o.outDeprecated)
	}
	o.out = o.outDeprecated
	_, err := fmt.Fprintln(streams.ErrOut, "warning: render -o/--output-dir is deprecated and goes in the next release: use --out-dir (-o will be the output format, as in the other commands)")
	return err
}
