package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// NewAllocatorCommand runs the Service address allocator (the Deployment
// `vipctl render` writes into DIR/manifests/).
func NewAllocatorCommand(streams IOStreams) *cobra.Command {
	var (
		kubeconfig, listen string
		metrics            metricsFlags
		o                  allocator.Options
	)
	cmd := &cobra.Command{
		Use:   "allocator [--kubeconfig FILE] [--namespace NS] [--id NAME]",
		Short: "Allocate service-pool addresses to LoadBalancer Services (one leader per cluster)",
		Long: `Runs as a Deployment with its own ServiceAccount. The replica holding the
Lease vipctl-allocator watches Services of type LoadBalancer (class unset or
vipctl.io/keepalived) and the pools in the vipctl-config ConfigMap, and writes
status.loadBalancer.ingress: requested addresses (spec.loadBalancerIP or the
vipctl.io/load-balancer-ips annotation), vipctl.io/pool, dual-stack, shared
addresses (vipctl.io/allow-shared-ip). It rebuilds its books from the
Services' statuses whenever it becomes leader, so an address is never handed
out twice. See docs/allocator.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Identity == "" {
				h, err := os.Hostname()
				if err != nil {
					return errors.New("--id: required (the pod name)")
				}
				o.Identity = h
			}
			if err := errors.Join(o.Validate(), checkListen("--listen", listen), checkListen("--metrics-listen", metrics.listen)); err != nil {
				return err
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			cfg.UserAgent = "vipctl-allocator/" + o.Identity
			// Each allocation writes a status and records an Event, on
			// clients of their own: client-go's default of 5 requests/s
			// would allocate 5 Services/s; a shared limit of 50 held a
			// burst of 1000 new Services to 25/s (40 s in the peers'
			// scale benchmark, docs/benchmarks.md). The Events may lag.
			events := rest.CopyConfig(cfg)
			cfg.QPS, cfg.Burst = 50, 100
			events.QPS, events.Burst = 25, 100
			if o.Client, err = kubernetes.NewForConfig(cfg); err != nil {
				return err
			}
			if o.EventClient, err = kubernetes.NewForConfig(events); err != nil {
				return err
			}
			// The ClusterVIPs status: a write per burst of changes
			// (debounced), on a client of its own.
			if o.Dynamic, err = dynamic.NewForConfig(rest.CopyConfig(events)); err != nil {
				return err
			}
			o.Log = slog.New(slog.NewTextHandler(streams.ErrOut, nil))
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			o.Metrics = allocator.NewMetrics(reg)
			c, err := allocator.NewController(o)
			if err != nil {
				return err
			}
			if listen != "" {
				// On the pod network: probes only, /metrics is for
				// authorized scrapers (--metrics-listen).
				srv, err := serveProbes(listen, nil, c.Ready, o.Log)
				if err != nil {
					return err
				}
				defer func() { _ = srv.Close() }()
			}
			defer metrics.serve(reg, o.Client, o.Log)()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return c.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, then in-cluster)")
	f.StringVar(&o.Namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap and the Lease")
	f.StringVar(&o.Identity, "id", os.Getenv("POD_NAME"), "this replica's name in the Lease (default $POD_NAME, then the hostname)")
	f.StringVar(&listen, "listen", fmt.Sprintf(":%d", manifests.AllocatorPort), "address of /healthz and /readyz; empty to disable")
	metrics.add(f, manifests.AllocatorMetricsCertDir+"/"+corev1.TLSCertKey, manifests.AllocatorMetricsCertDir+"/"+corev1.TLSPrivateKeyKey)
	f.DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "leader Lease duration")
	f.DurationVar(&o.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader keeps trying to renew")
	f.DurationVar(&o.RetryPeriod, "retry-period", 2*time.Second, "how often to try to acquire or renew")
	return cmd
}
