package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/diagnose"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

type diagnoseOptions struct {
	output, file, kubeconfig, namespace string
	force, local                        bool
	nodeName, root, netns               string
	include                             []string
	logLines                            int64
}

// NewDiagnoseCommand gathers a support bundle.
func NewDiagnoseCommand(streams IOStreams) *cobra.Command {
	var o diagnoseOptions
	cmd := &cobra.Command{
		Use:   "diagnose [NODE...] -o bundle.tar.gz [--include node.tar.gz...] | diagnose --local -o node.tar.gz",
		Short: "Gather what support needs into a tar.gz, secrets redacted",
		Long: `From the API: vipctl's version, the ConfigMap and the effective config,
vipctl status (table and JSON), each node's published annotations, the
Events vipctl recorded, and the logs of vipctl's pods (the static pods'
mirror pods of the NODEs named, every node by default, and the
allocator's). With --local, run on a node: the files the sidecar renders
and keeps, the daemons' answers (keepalived's state of every instance,
which it writes when signalled, changing nothing), the addresses on the
node's interfaces and the VIPs among them, and the nftables tables.
--include adds node bundles to the cluster's.
Keys, tokens and passwords are redacted. The bundle is written whole or
not at all, and never over an existing file without --force.`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			return runDiagnose(cmd, streams, o, nodes)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "the bundle to write (tar.gz); - for stdout")
	f.BoolVar(&o.force, "force", false, "replace the --output file if it exists")
	f.BoolVar(&o.local, "local", false, "gather this node's part (run on the node, as root)")
	f.StringArrayVar(&o.include, "include", nil, "a node's bundle (diagnose --local) to add; repeatable")
	f.StringVarP(&o.file, "file", "f", "", "ClusterVIPs file (default: the live ConfigMap)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&o.namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap and pods")
	f.Int64Var(&o.logLines, "log-lines", 2000, "last lines of each container's log to keep")
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "with --local: this node's name (default $NODE_NAME, then the host name)")
	f.StringVar(&o.root, "root", "", "with --local: where the node's root is mounted (/host in oc debug node/NAME)")
	f.StringVar(&o.netns, "netns", "", "with --local: the node's network namespace (labs only; a node's own is the host's)")
	markNonEmpty(cmd, "file")
	return cmd
}

func runDiagnose(cmd *cobra.Command, streams IOStreams, o diagnoseOptions, nodes []string) error {
	switch {
	case o.output == "":
		return errors.New("--output: name the bundle to write, e.g. -o vipctl-diagnose.tar.gz (- for stdout)")
	case o.local && len(nodes) > 0:
		return fmt.Errorf("--local gathers the node it runs on: drop the NODE argument(s) %s, or run without --local for the cluster's part", strings.Join(nodes, " "))
	case o.local && len(o.include) > 0:
		return errors.New("--include adds node bundles to the cluster's: run it without --local")
	case o.logLines <= 0:
		return fmt.Errorf("--log-lines: %d, want a positive number of lines", o.logLines)
	}
	errs := []error{checkNamespace(o.namespace)}
	for _, n := range nodes {
		if msg := cluster.NodeNameError(n); msg != "" {
			errs = append(errs, fmt.Errorf("NODE %q: %s", n, msg))
		}
	}
	// The node's files go under nodes/NODE/ in the bundle.
	if msg := cluster.NodeNameError(o.nodeName); o.local && o.nodeName != "" && msg != "" {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", o.nodeName, msg))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.output != "-" {
		// Refused before anything is gathered; checked again when the
		// file is put in place.
		if _, err := diagnose.OutputPath(o.output, o.force); errors.Is(err, diagnose.ErrExists) {
			return fmt.Errorf("--output: %s exists; pass --force to replace it", o.output)
		} else if err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	ctx := cmd.Context()
	now := time.Now().UTC()
	var a *diagnose.Archive
	if o.local {
		node := o.nodeName
		if node == "" {
			h, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("--node-name: not given and no host name: %w", err)
			}
			node = h
		}
		a = diagnose.Local(ctx, diagnose.LocalOptions{Target: host.Target{Root: o.root, Netns: o.netns}, Node: node, Now: now})
	} else {
		cl, err := connect(o.kubeconfig, o.namespace)
		if err != nil {
			return err
		}
		co := diagnose.ClusterOptions{Kube: cl.Kube, Namespace: o.namespace, Nodes: nodes, LogLines: o.logLines, Now: now}
		if o.file != "" {
			if co.Config, err = v1alpha1.Load(o.file); err != nil {
				return err
			}
		}
		if a, err = diagnose.Cluster(ctx, co); err != nil {
			return err
		}
		for _, inc := range o.include {
			if err := mergeBundle(a, inc); err != nil {
				return fmt.Errorf("--include %s: %w", inc, err)
			}
		}
	}
	if o.output == "-" {
		if err := a.Write(streams.Out); err != nil {
			return err
		}
	} else if err := a.WriteFile(o.output, o.force); err != nil {
		if errors.Is(err, diagnose.ErrExists) {
			return fmt.Errorf("--output: %s exists; pass --force to replace it", o.output)
		}
		return fmt.Errorf("--output: %w", err)
	}
	where := o.output
	if where == "-" {
		where = "stdout"
	}
	_, _ = fmt.Fprintf(streams.ErrOut, "wrote %s: %d files gathered, %d not (%s)\n", where, len(a.Names()), len(a.Problems()), diagnose.ProblemsFile)
	for _, p := range a.Problems() {
		_, _ = fmt.Fprintf(streams.ErrOut, "not gathered: %s: %s\n", p.What, p.Error)
	}
	return nil
}

func mergeBundle(a *diagnose.Archive, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no such file")
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return a.Merge(f)
}
