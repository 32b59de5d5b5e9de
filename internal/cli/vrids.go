package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/vrid"
)

type vridsOptions struct {
	file      string
	known     []string
	inventory string
	listen    string
	listenFor time.Duration
	output    string
}

// NewVRIDsCommand prints the cluster's VRRP IDs and checks them for clashes.
func NewVRIDsCommand(streams IOStreams) *cobra.Command {
	o := &vridsOptions{}
	cmd := &cobra.Command{
		Use:   "vr-ids [CLUSTER-NAME]",
		Short: "Print the cluster's VRRP IDs (OpenShift-compatible) and check them for clashes",
		Long: `Prints APIVirtualRouterID and IngressVirtualRouterID exactly as OpenShift's
baremetal-runtimecfg computes them. With -f it also prints the IDs of every
extra IngressController and every service-pool VRRP instance. --known,
--inventory and --listen compare them with other clusters and with what is
live on the LAN; any clash exits with status 2 and proposes overrides.`,
		Example: `  vipctl vr-ids ostest
  vipctl vr-ids -f cluster.yaml --known edge-sbegz,lab1
  vipctl vr-ids -f cluster.yaml --inventory clusters.yaml --listen br-ex --for 5s`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			check, err := o.check(args)
			if err != nil {
				return err
			}
			report, err := check.Run(context.Background())
			if err != nil {
				return err
			}
			if err := printData(streams.Out, o.output, report, func(w io.Writer) error {
				_, err := io.WriteString(w, report.Text())
				return err
			}); err != nil {
				return err
			}
			if len(report.Clashes) > 0 {
				return &ExitError{Code: ExitFinding, Err: fmt.Errorf("%d VRRP ID clash(es) found", len(report.Clashes))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "ClusterVIPs file: adds ingress shards, service pools, overrides and avoided IDs")
	f.StringSliceVar(&o.known, "known", nil, "other clusters on the LAN by name (their OpenShift IDs are computed)")
	f.StringVar(&o.inventory, "inventory", "", "YAML file of other clusters, by name or with explicit IDs")
	f.StringVar(&o.listen, "listen", "", "capture VRRP advertisements on this interface and include them in the check (needs CAP_NET_RAW); before installing, the NIC with the node's address, since br-ex does not exist yet")
	f.DurationVar(&o.listenFor, "for", 5*time.Second, "how long --listen captures")
	addOutputFlag(cmd, &o.output)
	markNonEmpty(cmd, "file", "inventory")
	return cmd
}

// check turns the arguments and flags into the check to run.
func (o *vridsOptions) check(args []string) (vrid.Check, error) {
	req, networks, err := o.request(args)
	if err != nil {
		return vrid.Check{}, err
	}
	c := vrid.Check{Request: req, Listen: o.listen, ListenFor: o.listenFor, Networks: networks}
	for _, name := range o.known {
		if err := vrid.ValidateClusterName(name); err != nil {
			return c, fmt.Errorf("--known: %w", err)
		}
		c.Others = append(c.Others, vrid.KnownCluster{Name: name})
	}
	if o.inventory != "" {
		inv, err := vrid.LoadInventory(o.inventory)
		if err != nil {
			return c, fmt.Errorf("--inventory: %w", err)
		}
		c.Others = append(c.Others, inv.Clusters...)
	}
	return c, nil
}

// request builds the ID request from the positional name, the file, or
// both, with the file's machine networks.
func (o *vridsOptions) request(args []string) (vrid.Request, []netip.Prefix, error) {
	var req vrid.Request
	if len(args) == 1 {
		req.Cluster = args[0]
		if err := vrid.ValidateClusterName(req.Cluster); err != nil {
			return req, nil, err
		}
	}
	if o.file == "" {
		if req.Cluster == "" {
			return req, nil, fmt.Errorf("name the cluster (vipctl vr-ids CLUSTER-NAME) or pass -f cluster.yaml")
		}
		req.Keys = []vrid.Key{v1alpha1.KeyAPI, v1alpha1.KeyIngress}
		return req, nil, nil
	}
	c, err := v1alpha1.Load(o.file)
	if err != nil {
		return req, nil, err
	}
	if req.Cluster != "" && req.Cluster != c.Metadata.Name {
		return req, nil, fmt.Errorf("cluster name %q does not match metadata.name %q in %s", req.Cluster, c.Metadata.Name, o.file)
	}
	var networks []netip.Prefix
	for _, n := range c.Spec.MachineNetworks {
		// Valid after Load.
		if p, err := netip.ParsePrefix(n); err == nil {
			networks = append(networks, p.Masked())
		}
	}
	return vrid.RequestFor(c), networks, nil
}
