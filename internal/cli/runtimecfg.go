package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/metricsserver"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/sidecar"
)

type runtimecfgOptions struct {
	once        runtimecfg.OnceOptions
	oneShot     bool
	kubeconfig  string
	listen      string
	metrics     metricsFlags
	namespace   string
	debounce    time.Duration
	wireEvery   time.Duration
	wireRate    int
	cpuProfile  string
	heapProfile string
}

// sidecarGCPercent is the sidecar's GOGC unless the environment sets one.
// It runs on every node and is idle between cluster changes: collecting
// when the heap has grown by a quarter instead of doubled costs little CPU
// (render latency did not move) and keeps the resident set small with
// thousands of Services (docs/benchmarks.md).
const sidecarGCPercent = 25

// NewRuntimecfgCommand runs the sidecar of the keepalived pod, or with
// --once its init container.
func NewRuntimecfgCommand(streams IOStreams) *cobra.Command {
	o := &runtimecfgOptions{}
	cmd := &cobra.Command{
		Use:   "runtimecfg --config FILE --bootstrap-nodes FILE --node-name NODE [--once]",
		Short: "Keep this node's keepalived and haproxy in step with the cluster",
		Long: `With --once (the keepalived pod's init container) renders this node's
keepalived.conf, haproxy.cfg and check scripts from the static files the
MachineConfig laid down and exits: no API server is needed, so the API VIP
comes up before the cluster does.

Without --once (the sidecar) it then watches the cluster with the node's own
credentials (Nodes, the API endpoints, router pods, LoadBalancer Services,
the vipctl ConfigMap), re-renders on every change (at once after a quiet spell, at most once per --debounce in a burst), has the real
daemons check each new config, swaps it in atomically and reloads keepalived
(SIGHUP) and haproxy (master socket). On any failure the files stay as they
were. It publishes the VIPs this node holds in its Node's vipctl.io/vips
annotation and serves /healthz, /readyz and /metrics on --listen (localhost),
and /metrics to the cluster's Prometheus on --metrics-listen: TLS, the
scraper's token checked with a TokenReview and its right to get /metrics
with a SubjectAccessReview, both with the node's credentials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.once.NodeName == "" {
				return errors.New("--node-name: required (or set NODE_NAME)")
			}
			if err := o.validate(); err != nil {
				return err
			}
			// A real node's pods start after a boot with haproxy not yet
			// listening: the API redirects wait for it.
			o.once.AwaitHaproxy = true
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.oneShot {
				res, err := runtimecfg.Once(ctx, o.once)
				for _, w := range res.Warnings {
					_, _ = fmt.Fprintln(streams.ErrOut, "warning:", w)
				}
				if errors.Is(err, runtimecfg.ErrNoInstances) {
					// The pod must start anyway (a crash loop helps no
					// one): keepalived holds nothing until the sidecar
					// renders from the API.
					_, _ = fmt.Fprintln(streams.ErrOut, "warning:", err)
					_, err = fmt.Fprintf(streams.Out, "wrote %d files: keepalived starts without VRRP instances\n", len(res.Written))
					return err
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(streams.Out, "rendered from %s: wrote %d files, reloaded %v\n", orNothing(res.From), len(res.Written), res.Reloaded)
				return err
			}
			return runSidecar(ctx, o, streams)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.oneShot, "once", false, "render from the static files, apply and exit (no API needed)")
	f.StringVar(&o.once.Config, "config", onnode.ClusterConfigPath, "ClusterVIPs file laid down by the MachineConfig")
	f.StringVar(&o.once.BootstrapNodes, "bootstrap-nodes", onnode.BootstrapNodesPath, "NodeList known at render time")
	f.StringVar(&o.once.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	f.BoolVar(&o.once.KeepDrain, "keep-drain", false, "with --once: leave a drain in place (the haproxy pod; only keepalived's pod ends a drain)")
	f.StringVar(&o.once.Root, "root", "", "prefix of every node path (tests and labs only)")
	f.StringVar(&o.once.Netns, "netns", "", "the node's network namespace (labs only; a real node uses the host's)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile to this file between two SIGUSR1 (labs and benchmarks)")
	_ = f.MarkHidden("root")
	_ = f.MarkHidden("netns")
	f.StringVar(&o.heapProfile, "heap-profile", "", "write a heap profile to this file at every SIGUSR2 (labs and benchmarks)")
	_ = f.MarkHidden("cpu-profile")
	_ = f.MarkHidden("heap-profile")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials (default $KUBECONFIG, then in-cluster)")
	f.StringVar(&o.listen, "listen", net.JoinHostPort("127.0.0.1", fmt.Sprint(onnode.SidecarPort)), "address of /healthz, /readyz and /metrics; empty to disable")
	o.metrics.add(f, onnode.KubeletServingCert, onnode.KubeletServingCert)
	f.StringVar(&o.namespace, "namespace", onnode.Namespace, "namespace of the vipctl ConfigMap")
	f.DurationVar(&o.debounce, "debounce", 200*time.Millisecond, "longest a change waits after a render: one after a quiet spell renders at once, one right after a render waits four times that render's length, at most this")
	f.DurationVar(&o.wireEvery, "wire-interval", sidecar.DefaultWireInterval, "rest between two passes that ask the node's VRRP interface who answers for each VIP of its instances (ARP, neighbour solicitation); 0 asks never")
	f.IntVar(&o.wireRate, "wire-rate", sidecar.DefaultWireRate, fmt.Sprintf("most questions a second, on average, of those passes (%d-%d)", minWireRate, maxWireRate))
	return cmd
}

// The bounds of --wire-rate: below one question a second a node with
// thousands of VIPs would take hours a pass; above maxWireRate the
// questions of a few nodes would be most of what a segment's hosts
// receive.
const (
	minWireRate = 1
	maxWireRate = 2000
)

// wireInterval is the sidecar's Options.WireInterval for --wire-interval,
// whose 0 means never (the Options' zero is the default).
func (o *runtimecfgOptions) wireInterval() time.Duration {
	if o.wireEvery == 0 {
		return -1
	}
	return o.wireEvery
}

// validate refuses flags the pod's own manifest would never give, before
// anything is rendered or the API asked.
func (o *runtimecfgOptions) validate() error {
	errs := []error{checkNamespace(o.namespace)}
	if msg := cluster.NodeNameError(o.once.NodeName); msg != "" {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", o.once.NodeName, msg))
	}
	if o.debounce < 0 {
		errs = append(errs, fmt.Errorf("--debounce %s: must not be negative", o.debounce))
	}
	if o.wireEvery < 0 || o.wireEvery > 0 && o.wireEvery < time.Second {
		errs = append(errs, fmt.Errorf("--wire-interval %s: want 0 (never) or 1s and more", o.wireEvery))
	}
	if o.wireRate < minWireRate || o.wireRate > maxWireRate {
		errs = append(errs, fmt.Errorf("--wire-rate %d: want %d-%d questions a second", o.wireRate, minWireRate, maxWireRate))
	}
	errs = append(errs, checkListen("--listen", o.listen), checkListen("--metrics-listen", o.metrics.listen))
	errs = append(errs, checkProfilePath("--cpu-profile", o.cpuProfile), checkProfilePath("--heap-profile", o.heapProfile))
	return errors.Join(errs...)
}

// checkProfilePath refuses a profile's path that could never be written,
// now rather than at the signal that asks for the profile, long after
// the start: a directory, or a file in a directory that does not exist.
// "" (no profile) passes.
func checkProfilePath(flag, p string) error {
	if p == "" {
		return nil
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory: name the profile's file", flag, p)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		return fmt.Errorf("%s %s: no directory %s to write it in", flag, p, filepath.Dir(p))
	}
	return nil
}

// checkListen refuses a listen address net.Listen would refuse, or whose
// port would be a random one no probe or scrape finds, before anything
// starts; "" (disabled) passes.
func checkListen(flag, addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT or :PORT (%s)", flag, addr, strings.TrimPrefix(err.Error(), "address "+addr+": "))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%s %q: port %q: want 1-65535", flag, addr, port)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && host != "localhost" {
			return fmt.Errorf("%s %q: %q is not an IP address of this host", flag, addr, host)
		}
	}
	return nil
}

// orNothing names an empty source.
func orNothing(from string) string {
	if from == "" {
		return "nothing"
	}
	return from
}

func runSidecar(ctx context.Context, o *runtimecfgOptions, streams IOStreams) error {
	log := slog.New(slog.NewTextHandler(streams.ErrOut, nil))
	if o.cpuProfile != "" {
		defer profileOnSignal(ctx, o.cpuProfile, log)()
	}
	if o.heapProfile != "" {
		heapProfileOnSignal(ctx, o.heapProfile, log)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(sidecarGCPercent)
	}
	// The init container normally did this already; doing it again costs
	// nothing when the files are current and makes the sidecar enough on
	// its own. Only the init container starts the pod undrained and
	// unsynced: this container also starts after its own crash, in a pod
	// whose node may be drained and has synced, and must not hold the
	// node back (its Cluster-policy routes announced as backups until the
	// next sync: the router dropped its next hop for 3.7 s in rehearsal
	// r48) nor end a drain.
	once := o.once
	once.KeepDrain = true
	res, err := runtimecfg.Once(ctx, once)
	for _, w := range res.Warnings {
		log.Warn(w)
	}
	switch {
	case errors.Is(err, runtimecfg.ErrNoInstances):
		log.Warn("nothing on disk to render this node from; waiting for the API", "err", err)
	case err != nil:
		log.Error("rendering from the files on disk failed; the files on disk stay", "err", err)
	case len(res.Written) > 0:
		log.Info("rendered from the files on disk", "from", res.From, "written", res.Written, "reloaded", res.Reloaded)
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "vipctl-runtimecfg/" + o.once.NodeName
	// The kubeconfig names api-int, the API VIP: when it does not
	// answer, the control-plane nodes the node last knew of do.
	sidecar.WithAPIFallback(cfg, res.Nodes, o.once.NodeName)
	// The ClusterVIPs object is no built-in type: JSON.
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	// Every resource the sidecar reads is a built-in type: protobuf lists
	// of thousands of Services decode with far less garbage than JSON, as
	// for kubelet and kube-proxy, which also run on every node.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s, err := sidecar.New(sidecar.Options{
		OnceOptions: o.once, Client: client, Dynamic: dyn, Namespace: o.namespace, Debounce: o.debounce,
		WireInterval: o.wireInterval(), WireRate: o.wireRate,
		Log: log, Metrics: sidecar.NewMetrics(reg),
	})
	if err != nil {
		return err
	}
	if o.listen != "" {
		srv, err := serveProbes(o.listen, reg, s.Ready, log)
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
	}
	defer o.metrics.serve(reg, client, log)()
	return s.Run(ctx)
}

// serveProbes serves /healthz (the process answers), /readyz (ready()
// returns nil) and, unless reg is nil, /metrics without authentication
// (on localhost only).
func serveProbes(addr string, reg *prometheus.Registry, ready func() error, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	if reg != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("probe server stopped", "err", err)
		}
	}()
	return srv, nil
}

// metricsFlags configure the /metrics endpoint for the cluster's
// Prometheus (pkg/metricsserver), which the sidecar and the allocator
// serve alike.
type metricsFlags struct {
	listen, cert, key string
}

func (m *metricsFlags) add(f *pflag.FlagSet, cert, key string) {
	f.StringVar(&m.listen, "metrics-listen", fmt.Sprintf(":%d", v1alpha1.DefaultMetricsPort), "address of /metrics for the cluster's Prometheus (TLS, scrapers authorized by the API server); empty to disable")
	f.StringVar(&m.cert, "metrics-cert", cert, "serving certificate of --metrics-listen, PEM, read again when it changes; self-signed while unreadable")
	f.StringVar(&m.key, "metrics-key", key, "its private key, PEM (may be the same file)")
}

// serve starts the endpoint and returns what stops it. A port it cannot
// bind is logged, not fatal: the VIPs matter more than their metrics (the
// scrape target shows down).
func (m *metricsFlags) serve(reg *prometheus.Registry, client kubernetes.Interface, log *slog.Logger) func() {
	if m.listen == "" {
		return func() {}
	}
	srv, err := metricsserver.Start(metricsserver.Options{Addr: m.listen, Gatherer: reg, Client: client, CertFile: m.cert, KeyFile: m.key, Log: log})
	if err != nil {
		log.Error("no /metrics for the cluster's Prometheus", "err", err)
		return func() {}
	}
	return func() { _ = srv.Close() }
}
