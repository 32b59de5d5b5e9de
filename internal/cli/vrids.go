package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
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

// vridsReport is what -o json|yaml prints; the text form keeps OpenShift's
// two first lines byte for byte so existing scripts keep parsing them.
type vridsReport struct {
	Cluster           string           `json:"cluster"`
	IDs               []vrid.Entry     `json:"ids"`
	Live              []liveSighting   `json:"live,omitempty"`
	Clashes           []string         `json:"clashes,omitempty"`
	ProposedOverrides map[string]uint8 `json:"proposedOverrides,omitempty"`
}

type liveSighting struct {
	Interface string `json:"interface"`
	vrid.Observation
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
			report, err := o.run(context.Background(), args)
			if err != nil {
				return err
			}
			if err := printData(streams.Out, o.output, report, report.writeText); err != nil {
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
	f.StringVar(&o.listen, "listen", "", "capture VRRP advertisements on this interface and include them in the check (needs CAP_NET_RAW)")
	f.DurationVar(&o.listenFor, "for", 5*time.Second, "how long --listen captures")
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *vridsOptions) run(ctx context.Context, args []string) (*vridsReport, error) {
	req, err := o.request(args)
	if err != nil {
		return nil, err
	}
	assignment, err := vrid.Assign(req)
	if err != nil {
		return nil, err
	}
	report := &vridsReport{Cluster: req.Cluster, IDs: assignment.Entries}

	var others []vrid.KnownCluster
	for _, name := range o.known {
		if err := vrid.ValidateClusterName(name); err != nil {
			return nil, fmt.Errorf("--known: %w", err)
		}
		others = append(others, vrid.KnownCluster{Name: name})
	}
	if o.inventory != "" {
		inv, err := vrid.LoadInventory(o.inventory)
		if err != nil {
			return nil, fmt.Errorf("--inventory: %w", err)
		}
		others = append(others, inv.Clusters...)
	}
	var live []vrid.Observation
	if o.listen != "" {
		if o.listenFor <= 0 {
			return nil, fmt.Errorf("--for: must be positive, got %s", o.listenFor)
		}
		live, err = vrid.Listen(ctx, o.listen, o.listenFor)
		if err != nil {
			return nil, fmt.Errorf("--listen %s: %w", o.listen, err)
		}
		for _, obs := range live {
			report.Live = append(report.Live, liveSighting{Interface: o.listen, Observation: obs})
		}
	}
	clashes := vrid.FindClashes(assignment, others, live, o.listen)
	if len(clashes) == 0 {
		return report, nil
	}
	var taken []uint8
	for _, c := range clashes {
		report.Clashes = append(report.Clashes, c.String())
		taken = append(taken, c.ID)
	}
	taken = append(taken, otherIDs(others)...)
	for _, obs := range live {
		taken = append(taken, obs.ID)
	}
	proposal, err := vrid.ProposeOverrides(req, clashes, taken)
	if err != nil {
		return nil, fmt.Errorf("no clash-free set of IDs exists: %w", err)
	}
	// The proposal is printed as a whole virtualRouterIDs block, so it keeps
	// the file's own pins next to the new ones.
	report.ProposedOverrides = map[string]uint8{}
	for k, id := range req.Overrides {
		report.ProposedOverrides[string(k)] = id
	}
	for k, id := range proposal {
		report.ProposedOverrides[string(k)] = id
	}
	return report, nil
}

// request builds the ID request from the positional name, the file, or both.
func (o *vridsOptions) request(args []string) (vrid.Request, error) {
	var req vrid.Request
	if len(args) == 1 {
		req.Cluster = args[0]
		if err := vrid.ValidateClusterName(req.Cluster); err != nil {
			return req, err
		}
	}
	if o.file == "" {
		if req.Cluster == "" {
			return req, fmt.Errorf("name the cluster (vipctl vr-ids CLUSTER-NAME) or pass -f cluster.yaml")
		}
		req.Keys = []vrid.Key{v1alpha1.KeyAPI, v1alpha1.KeyIngress}
		return req, nil
	}
	c, err := v1alpha1.Load(o.file)
	if err != nil {
		return req, err
	}
	if req.Cluster != "" && req.Cluster != c.Metadata.Name {
		return req, fmt.Errorf("cluster name %q does not match metadata.name %q in %s", req.Cluster, c.Metadata.Name, o.file)
	}
	return vrid.RequestFor(c), nil
}

func otherIDs(others []vrid.KnownCluster) []uint8 {
	var ids []uint8
	for _, o := range others {
		if len(o.IDs) == 0 {
			api, ingress := vrid.OpenShiftIDs(o.Name)
			ids = append(ids, api, ingress)
			continue
		}
		for _, id := range o.IDs {
			ids = append(ids, id)
		}
	}
	return ids
}

func (r *vridsReport) writeText(w io.Writer) error {
	var b strings.Builder
	var rest []vrid.Entry
	for _, e := range r.IDs {
		switch e.Key {
		case v1alpha1.KeyAPI:
			fmt.Fprintf(&b, "APIVirtualRouterID: %d\n", e.ID)
		case v1alpha1.KeyIngress:
			fmt.Fprintf(&b, "IngressVirtualRouterID: %d\n", e.ID)
		default:
			rest = append(rest, e)
		}
	}
	for _, e := range rest {
		fmt.Fprintf(&b, "VirtualRouterID %s: %d\n", e.Key, e.ID)
	}
	for _, l := range r.Live {
		fmt.Fprintf(&b, "live: VirtualRouterID %d from %s on %s (VRRPv%d)\n", l.ID, l.Source, l.Interface, l.Version)
	}
	for _, c := range r.Clashes {
		fmt.Fprintln(&b, c)
	}
	if len(r.ProposedOverrides) > 0 {
		keys := make([]string, 0, len(r.ProposedOverrides))
		for k := range r.ProposedOverrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("# clash-free overrides; paste under spec.vrrp in the cluster file:\nvirtualRouterIDs:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %d\n", k, r.ProposedOverrides[k])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
