package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vipctl/vipctl/pkg/bootstrap"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/update"
)

type bootstrapOptions struct {
	run     bootstrap.Options
	servers []string
	output  string
}

// NewBootstrapCommand holds the API VIP while the cluster installs.
func NewBootstrapCommand(streams IOStreams) *cobra.Command {
	o := &bootstrapOptions{}
	cmd := &cobra.Command{
		Use:   "bootstrap -f cluster.yaml --nodes nodes.yaml [--bootstrap-address IP] [--interface IFACE]",
		Short: "Hold the API VIP during an OpenShift install, until the control-plane nodes answer",
		Long: `Runs keepalived and haproxy for the API VIP (api 6443 and, with
spec.api.internalPort, api-int 22623) on the bootstrap machine or any host of
the API VIP's segment whose address spec.bootstrap names, before any vipctl
pod can: the control-plane nodes fetch their first Ignition from api-int and
the installer waits on api. haproxy balances over the bootstrap machine's
kube-apiserver and machine config server (--bootstrap-address, default this
host) and the control-plane nodes of --nodes.

Once the control-plane nodes answer through their own haproxy for
--yield-after without a break, it gives the VIP to them make-before-break
(priority 1; a node takes the VIP while this host still answers), keeps
serving the connections it accepted for --grace, stops keepalived and
haproxy, removes what it set up in the network namespace and exits 0.
SIGINT or SIGTERM stop it early, handing over first when the nodes answer.

In place (the agent-based installer's rendezvous host, which reboots into a
control-plane node: spec.bootstrap names that node's address), it gives the
VIP only to another control-plane node, once that node's own kube-apiserver
is ready, and leaves the host's bootstrap kube-apiserver running.
Before it starts anything it refuses to run when this host's own firewall
(nft -j list ruleset: firewalld, nftables, iptables-nft) drops the nodes'
VRRP adverts or the VIP's connections, naming the commands that open them
(--skip-firewall-check to start anyway).
With a routed API VIP (spec.api.routed) it also runs FRR and announces the
VIP to the routers spec.bootstrap.labels select; a router whose session has
a password (passwordSecret) needs that Secret's manifest, the one added to
the installer's manifests, with --bgp-secret.
Needs root (CAP_NET_ADMIN, CAP_NET_RAW) and keepalived and haproxy in PATH,
as vipctl's image has them.`,
		Example: `  # on the bootstrap machine, in vipctl's image:
  podman run --rm --net=host --privileged --user 0 -v $PWD:/work:z IMAGE \
    vipctl bootstrap -f /work/cluster.yaml --nodes /work/nodes.yaml
  # in place, on the agent-based installer's rendezvous host (master-0's
  # address in spec.bootstrap), as a unit before the bootstrap starts:
  podman run --rm --net=host --privileged --user 0 -v /etc/vipctl:/vipctl:z IMAGE \
    vipctl bootstrap -f /vipctl/cluster.yaml --nodes /vipctl/nodes.yaml
  # on another host of the segment (spec.bootstrap names its address):
  vipctl bootstrap -f cluster.yaml --nodes nodes.yaml --bootstrap-address 198.51.100.10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			for _, s := range o.servers {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return fmt.Errorf("--bootstrap-address %q: not an IP address", s)
				}
				o.run.Servers = append(o.run.Servers, a)
			}
			o.run.Log = slog.New(slog.NewTextHandler(streams.ErrOut, nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := bootstrap.Run(ctx, o.run)
			if res != nil {
				if perr := printData(streams.Out, o.output, res, func(w io.Writer) error {
					_, err := io.WriteString(w, res.Text())
					return err
				}); perr != nil && err == nil {
					err = perr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.run.Config, "file", "f", "", "ClusterVIPs file naming the bootstrap host (spec.bootstrap)")
	f.StringVar(&o.run.Nodes, "nodes", "", "the node list the MachineConfigs were rendered with (vipctl render --nodes)")
	f.StringSliceVar(&o.servers, "bootstrap-address", nil, "where the bootstrap machine's kube-apiserver and machine config server answer, one per family (default this host, spec.bootstrap.addresses)")
	f.StringVar(&o.run.Interface, "interface", "", "interface for VRRP and the VIP (default the one holding spec.bootstrap.addresses)")
	f.StringVar(&o.run.Dir, "dir", bootstrap.DefaultDir, "directory for the configs, pid files, sockets and daemon logs")
	f.DurationVar(&o.run.YieldAfter, "yield-after", bootstrap.DefaultYieldAfter, "how long the control-plane nodes must answer without a break before they get the VIP")
	f.StringArrayVar(&o.run.BGPSecrets, "bgp-secret", nil, bgpSecretUsage)
	f.BoolVar(&o.run.SkipFirewallCheck, "skip-firewall-check", false, "start even when this host's firewall drops the control-plane nodes' VRRP adverts or the VIP's connections")
	f.DurationVar(&o.run.Grace, "grace", dataplane.HandoverGrace, "how long to keep serving the connections accepted here after the VIP left")
	addOutputFlag(cmd, &o.output)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("nodes")
	cmd.AddCommand(newBootstrapIgnitionCommand(streams))
	return cmd
}

// bgpSecretUsage is the --bgp-secret flag's of both commands.
const bgpSecretUsage = "a Secret manifest in vipctl-system (the one added to the installer's manifests) holding the session password of a router the bootstrap host peers with (spec.api.routed: a passwordSecret of the peers spec.bootstrap.labels select); once per Secret"

// newBootstrapIgnitionCommand adds `vipctl bootstrap` to the installer's
// bootstrap Ignition, so that the bootstrap machine runs it itself.
func newBootstrapIgnitionCommand(streams IOStreams) *cobra.Command {
	var o bootstrap.Options
	var into, installConfig string
	cmd := &cobra.Command{
		Use:   "ignition -f cluster.yaml --nodes nodes.yaml --into bootstrap.ign [--install-config install-config.yaml]",
		Short: "Add vipctl bootstrap to the installer's bootstrap Ignition, to run on the bootstrap machine",
		Long: `Adds to the bootstrap machine's Ignition config (openshift-install's
bootstrap.ign, after "create ignition-configs" and before "create cluster",
which takes the file as it finds it) the cluster file and the node list,
under ` + bootstrap.IgnitionDir + `, and the enabled unit ` + bootstrap.IgnitionUnit + `,
which runs vipctl bootstrap in the cluster's vipctl image (spec.images.vipctl)
with podman as soon as the machine's network is up. spec.bootstrap must name
the bootstrap machine's address (platform.baremetal.bootstrapExternalStaticIP,
checked with --install-config). The inputs are checked as vipctl bootstrap
checks them first; the file is replaced atomically, its mode kept, or left
as it was on any error. Running it again replaces what it added.`,
		Example: `  openshift-install create ignition-configs --dir install
  vipctl bootstrap ignition -f cluster.yaml --nodes nodes.yaml --into install/bootstrap.ign \
    --install-config install-config.yaml
  openshift-install create cluster --dir install`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			ign, err := os.ReadFile(into)
			if err != nil {
				return fmt.Errorf("--into: %w", err)
			}
			out, err := bootstrap.AddToIgnition(ign, o, installConfig)
			if err != nil {
				return fmt.Errorf("--into %s: %w", into, err)
			}
			if err := update.WriteFile(into, out); err != nil {
				return fmt.Errorf("--into %s: %w", into, err)
			}
			_, err = fmt.Fprintf(streams.Out, "%s: %s and %s added, %s enabled\n", into, bootstrap.IgnitionConfigPath, bootstrap.IgnitionNodesPath, bootstrap.IgnitionUnit)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Config, "file", "f", "", "ClusterVIPs file naming the bootstrap machine (spec.bootstrap)")
	f.StringVar(&o.Nodes, "nodes", "", "the node list the MachineConfigs were rendered with (vipctl render --nodes)")
	f.StringVar(&into, "into", "", "the installer's bootstrap Ignition config, edited in place (install-dir/bootstrap.ign)")
	f.StringArrayVar(&o.BGPSecrets, "bgp-secret", nil, bgpSecretUsage+"; added to the Ignition config beside the cluster file")
	f.StringVar(&installConfig, "install-config", "", "install-config.yaml: spec.bootstrap.addresses must name its platform.baremetal.bootstrapExternalStaticIP")
	for _, name := range []string{"file", "nodes", "into"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
