// Package sidecar is the keepalived pod's long-running container: it
// watches the cluster with the node's own credentials (Nodes, Services,
// EndpointSlices, router pods, the vipctl ConfigMap), turns what it sees
// into a cluster.State, and on every change calls runtimecfg's
// Node.Reconcile; it publishes what the node holds (vipctl.io/vips, BGP
// sessions), follows the drain annotation, and exposes its metrics. Its
// rule: it decides when and from what a node is brought in line, never
// how: every file and kernel write goes through runtimecfg (a drain too:
// Node.Drain) and dataplane.
package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// Options configure the long-running sidecar.
type Options struct {
	runtimecfg.OnceOptions
	// Client talks to the API with the node's own identity.
	Client kubernetes.Interface
	// Dynamic, with the same identity, follows the ClusterVIPs object
	// that is the live config once migrated (pkg/configsource); nil
	// follows the ConfigMap alone.
	Dynamic dynamic.Interface
	// ObjectProbe is how often the sidecar looks again for the
	// ClusterVIPs resource while it is not served (60 s when zero): one
	// cheap request per node, like the API probe.
	ObjectProbe time.Duration
	// Namespace holds the vipctl ConfigMap (onnode.Namespace).
	Namespace string
	// Debounce is the longest a change waits after a sync before the
	// next (nextSync): a burst of cluster events is applied at its start
	// and then at most once per Debounce.
	Debounce time.Duration
	// HeldInterval is how soon a failed publish of the VIPs this node
	// holds is retried. They are read when an address changes, after
	// every sync and every HeldResync.
	HeldInterval time.Duration
	// HeldResync is how often the held VIPs are read with nothing to
	// prompt it (dataplane.LocalResync when zero); a publication older
	// than half of it is then written again, changed or not (see
	// publish).
	HeldResync time.Duration
	// SessionInterval is how often bgpd's sessions are read (and after
	// every FRR reload) when the node has bgp pools.
	SessionInterval time.Duration
	// StepTimeout bounds one publication of the held VIPs or the BGP
	// sessions, API calls included (10 s when zero): a request stuck on a
	// dead connection fails and is retried instead of stopping every
	// later publication.
	StepTimeout time.Duration
	// APIProbeInterval is how often the sidecar asks the API's /readyz
	// (30 s when zero), for vipctl_runtimecfg_api_reachable: a watch
	// whose apiserver refuses connections retries quietly, so failed
	// watches alone do not tell that the API is out of reach.
	APIProbeInterval time.Duration
	// Addresses lists the addresses on this node's interfaces; nil reads
	// them with netlink in the node's network namespace (Target).
	Addresses func() ([]netip.Addr, error)
	// Interface names this node's interface with an address in a network;
	// nil asks netlink in the node's network namespace. It is used when
	// the Node has no vipctl.io/interface annotation.
	Interface func(netip.Prefix) (string, error)
	// WireInterval is the rest between two passes of questions on the
	// wire for this node's VIPs (wire.go; DefaultWireInterval when zero,
	// none when negative); WireRate bounds their questions per second
	// (DefaultWireRate when zero).
	WireInterval time.Duration
	WireRate     int
	// ClashProposeAfter is how long a router outside the cluster must
	// advertise one of its VRRP IDs before the sidecar proposes another
	// (clash.go; DefaultClashProposeAfter when zero).
	ClashProposeAfter time.Duration
	Log               *slog.Logger
	Metrics           *Metrics
}

// Sidecar keeps one node's keepalived and haproxy in step with the
// cluster. Every cluster change triggers a debounced render of the whole
// desired state, which is applied only when it differs from what is on
// disk; anything that fails leaves the last good files in place.
type Sidecar struct {
	o Options
	// passwords are the BGP peers' passwords as last read
	// (bgppasswords.go).
	passwords bgpPasswords
	static    *v1alpha1.ClusterVIPs
	log       *slog.Logger
	m         *Metrics
	rec       record.EventRecorder
	nodeRef   *corev1.ObjectReference

	// object is the ClusterVIPs object when it is the live config; nil
	// without Options.Dynamic.
	object    *configsource.Object
	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced
	nodes     cache.GenericLister
	services  cache.GenericLister
	configMap cache.GenericLister
	slices    cache.GenericLister
	routers   map[string]cache.GenericLister

	kick chan struct{}
	// publishKick asks for the held VIPs to be read and published (an
	// address changed, or a sync changed which addresses are VIPs).
	publishKick chan struct{}
	// sessionKick asks for a read of bgpd's sessions (after a reload).
	sessionKick chan struct{}
	// vrrpKick tells vrrpLoop the VRRP interfaces changed.
	vrrpKick chan struct{}
	// foreign counts the adverts of routers outside the cluster.
	foreign *foreignRouters
	// strangerEvents gates the VIPAnsweredByStranger Events, by VIP and
	// answerer.
	strangerEvents *eventGate[string]
	// proxy asks this node's service proxy whether it delivers the Local
	// Services whose endpoints run here.
	proxy *proxyGate
	// proxyPending are the Local Services the last sync held back for
	// the proxy (logged when it changes).
	proxyPending map[string]bool

	// staticUnknown are the fields of the static file this vipctl does
	// not know (reportUnknownFields).
	staticUnknown v1alpha1.UnknownFields

	mu sync.Mutex
	// unknownFields is what reportUnknownFields last said, by object.
	unknownFields map[string]string
	// liveDay2 is the last valid ConfigMap config; nil until one is seen.
	liveDay2 *v1alpha1.ClusterVIPs
	// known maps every VIP of the last render to its instance key.
	known map[netip.Addr]v1alpha1.InstanceKey
	// announced are the bgp pool addresses this node's bgpd was last
	// told to announce: on no interface, so published from here.
	announced []netip.Addr
	// unannounced are the Local Services last reported as having no VRRP
	// ID, so each gets its Event once, not on every sync.
	unannounced map[string]bool
	// missingIfaces are the owners last reported as on an interface this
	// node lacks (reportMissingInterfaces).
	missingIfaces map[onnode.MissingInterface]bool
	// lastErr is why the last sync kept the last good config.
	lastErr   error
	applied   bool
	published v1alpha1.HeldVIPs
	// publishedAt is when published was last written.
	publishedAt time.Time
	// appliedDigest is the SpecDigest of the config the last successful
	// sync applied; digestPublished what the Node's AnnotationNodeConfig
	// was last set to.
	appliedDigest, digestPublished string
	// daemonPIDs are keepalived's and haproxy's PIDs as last seen
	// (publish only).
	daemonPIDs map[string]int
	// bgp says the last render gave this node a frr.conf; rendered that
	// there was a render at all.
	bgp, rendered bool
	// sessions are bgpd's sessions as last read.
	sessions v1alpha1.BGPSessions
	// onNode is the Node's vipctl.io/bgp-sessions as last written (nil:
	// absent), asked from the API once at start (onNodeKnown); only the
	// sessions loop touches them.
	onNode      *string
	onNodeKnown bool
	since       map[netip.Addr]time.Time
	// model is the config of the last sync, compiled (followEarly).
	model atomic.Pointer[cluster.Model]
	// earlyAt is when followEarly last handed the follower an address
	// (Unix nanoseconds; earlyYield).
	earlyAt atomic.Int64
	// redirectWaiting says the last sync held the API redirects back
	// until haproxy listens (runtimecfg.Node.AwaitHaproxy): the next
	// sync comes a second later.
	redirectWaiting atomic.Bool
	// node is what every sync brings in line; its LocalVIPs keep the VIPs
	// held here local for a while after they leave.
	node *runtimecfg.Node
	// vrrpIfaces are the node's VRRP interfaces as of the last render.
	vrrpIfaces []string
	// wire is what wireLoop asks for, as of the last render.
	wire wireTargets
	// wirePub is what wireLoop last published.
	wirePub wirePublished
	// healing is what wireLoop remembers of its healing (heal.go).
	healing healState
	// drainAsked is the own Node's cluster.DrainAnnotation as of the
	// last sync; drainedByAPI says this sidecar drained the node for it
	// (a drain keepalived's preStop started is not the API's to end).
	drainAsked, drainedByAPI bool
}

// New loads the static config and prepares the watches. Run starts
// them.
func New(o Options) (*Sidecar, error) {
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.HeldResync <= 0 {
		o.HeldResync = dataplane.LocalResync
	}
	if o.HeldInterval <= 0 {
		o.HeldInterval = time.Second
	}
	if o.SessionInterval <= 0 {
		o.SessionInterval = 5 * time.Second
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 10 * time.Second
	}
	if o.APIProbeInterval <= 0 {
		o.APIProbeInterval = 30 * time.Second
	}
	if o.WireInterval == 0 {
		o.WireInterval = DefaultWireInterval
	}
	if o.WireRate <= 0 {
		o.WireRate = DefaultWireRate
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	// The node's namespace: the host's on a real node, its own in a lab
	// (--netns).
	if o.Addresses == nil {
		o.Addresses = func() ([]netip.Addr, error) { return dataplane.TargetAddresses(o.Target) }
	}
	if o.Interface == nil {
		o.Interface = func(n netip.Prefix) (string, error) { return dataplane.TargetInterface(o.Target, n) }
	}
	if o.Namespace == "" {
		o.Namespace = onnode.Namespace
	}
	static, staticUnknown, err := v1alpha1.LoadStored(o.Config)
	if err != nil {
		return nil, err
	}
	s := &Sidecar{
		o: o, static: static, staticUnknown: staticUnknown, log: o.Log.With("node", o.NodeName), m: o.Metrics,
		kick: make(chan struct{}, 1), publishKick: make(chan struct{}, 1), sessionKick: make(chan struct{}, 1), vrrpKick: make(chan struct{}, 1), routers: map[string]cache.GenericLister{},
		since:   map[netip.Addr]time.Time{},
		node:    runtimecfg.NewNode(o.Target, o.NodeName, dataplane.NewLocalVIPs(o.Target, dataplane.HandoverGrace)),
		nodeRef: &corev1.ObjectReference{Kind: "Node", Name: o.NodeName, UID: "", APIVersion: "v1"},
	}
	s.node.AwaitHaproxy = o.AwaitHaproxy
	s.proxy = newProxyGate(o.Target, s.trigger)
	s.strangerEvents = newEventGate[string](foreignEventEvery, foreignSeriesMax)
	s.foreign = newForeignRouters(s.m, s.log, func(reason, msg string) {
		s.rec.Event(s.nodeRef, corev1.EventTypeWarning, reason, msg)
	}, o.ClashProposeAfter)
	if o.Dynamic != nil {
		if o.ObjectProbe <= 0 {
			o.ObjectProbe = time.Minute
		}
		s.object = configsource.NewObject(o.Dynamic, static.Metadata.Name, o.ObjectProbe, s.log, s.trigger)
	}
	s.node.Local.OnAddressChange(s.publishSoon)
	s.node.Local.SetLog(s.log)
	s.watch()
	return s, nil
}

// Run renders from the static files first (as --once does), then watches
// the cluster until ctx ends. It returns only on ctx's end or a failure to
// start; sync failures are logged, counted and retried.
func (s *Sidecar) Run(ctx context.Context) error {
	if err := runtimecfg.InitRunFiles(s.o.Target, s.static); err != nil {
		return err
	}
	bc := record.NewBroadcaster(record.WithContext(ctx))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.o.Client.CoreV1().Events("")})
	defer bc.Shutdown()
	s.rec = bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: v1alpha1.EventSourceSidecar, Host: s.o.NodeName})
	s.reportUnknownFields(unknownInFile, s.o.Config, s.staticUnknown)

	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, f := range s.factories {
			f.Shutdown()
		}
	}()
	s.followFromBoot()
	var wg sync.WaitGroup
	if s.object != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.object.Run(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.publishLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.sessionsLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.drainLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.wireLoop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.repeat(ctx, s.o.APIProbeInterval, s.o.APIProbeInterval, 0, nil, s.probeAPI, "api-probe", "cannot reach the API")
	}()
	// The peers' passwords before the first render, so that frr.conf
	// keeps them: from frr.conf as it is, then from their Secrets.
	s.seedPasswords()
	pctx, cancel := context.WithTimeout(ctx, s.o.StepTimeout)
	err := s.readPasswords(pctx)
	cancel()
	if err != nil {
		s.log.Error("cannot read a BGP peer's password", "err", err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.passwordsLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.vrrpLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.proxy.loop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.node.Local.Run(ctx, dataplane.LocalResync, func(err error) {
			s.m.Failures.WithLabelValues("local-vips").Inc()
			s.log.Error("keeping the VIPs local for handovers", "err", err)
		})
	}()
	defer wg.Wait()

	s.log.Info("waiting for the cluster caches; the files on disk stay as they are until then")
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return nil
	}
	s.log.Info("caches synced")
	s.syncLoop(ctx)
	return nil
}

// syncLoop syncs on every kick, debounced, and again after a failed sync
// (5 s) or one that left the API redirects waiting for haproxy (1 s),
// until ctx ends.
func (s *Sidecar) syncLoop(ctx context.Context) {
	s.trigger()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	var next time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retry.C:
		}
		// A change after a quiet spell (a Service added) is applied at
		// once; one right after a sync waits (nextSync), and what else
		// arrives meanwhile (the rest of a rollout, a relist) is applied
		// with it.
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(time.Until(next), time.Until(time.Unix(0, s.earlyAt.Load()).Add(earlyYield)))):
		}
		select {
		case <-s.kick:
		default:
		}
		start := time.Now()
		err := s.Sync(ctx)
		next = nextSync(start, time.Now(), s.o.Debounce)
		switch {
		case err != nil:
			retry.Reset(5 * time.Second)
		case s.redirectWaiting.Load():
			// Soon after haproxy listens, not 5 s: the node's own
			// clients reach the API VIP's holder meanwhile, but a holder
			// here needs the redirects.
			retry.Reset(time.Second)
		}
	}
}

// earlyYield is how long a render waits after the Services watch handed
// the follower a new address (followEarly): the node that holds its
// anchor adds it in an early sync of a few milliseconds, and every
// node's render of the whole cluster (~50 ms of CPU at 5000 Services)
// would otherwise compete with it for the cores.
const earlyYield = 30 * time.Millisecond

// syncShare bounds the time the sidecar spends syncing while changes
// keep coming: after a sync it waits syncShare times as long as the sync
// took before the next (a fifth of its time at most).
const syncShare = 4

// nextSync is the earliest the next sync may start after one that ran
// from start to end: syncShare times its length later, and never more
// than debounce. Where a sync is cheap (a small cluster, a few thousand
// Services) Services created one after another are each applied within
// milliseconds; where it is dear (2000 nodes: 0.13 s) the syncs of a
// burst stay debounce apart.
func nextSync(start, end time.Time, debounce time.Duration) time.Time {
	return end.Add(min(debounce, syncShare*end.Sub(start)))
}

// Sync renders the desired state from the caches and applies it.
func (s *Sidecar) Sync(ctx context.Context) error {
	start := time.Now()
	err := s.sync(ctx)
	s.m.SyncSeconds.Observe(time.Since(start).Seconds())
	s.mu.Lock()
	changed := (err == nil) != (s.lastErr == nil) || (err != nil && s.lastErr != nil && err.Error() != s.lastErr.Error())
	s.lastErr = err
	if err == nil {
		s.applied = true
	}
	s.mu.Unlock()
	s.m.SyncFailing.Set(b2f(err != nil))
	if err != nil {
		s.m.Failures.WithLabelValues(runtimecfg.Reason(err)).Inc()
		s.log.Error("keeping the last good config", "err", err)
		if changed {
			s.rec.Event(s.nodeRef, corev1.EventTypeWarning, "ConfigKept", truncate(err.Error()))
		}
		return err
	}
	s.m.LastGood.SetToCurrentTime()
	return nil
}

// Ready tells whether the sidecar has synced and applied at least once and
// its last sync succeeded.
func (s *Sidecar) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.applied {
		if s.lastErr != nil {
			return s.lastErr
		}
		return errors.New("not synced with the cluster yet")
	}
	return s.lastErr
}

func (s *Sidecar) sync(ctx context.Context) error {
	readAt := time.Now()
	c, source, err := s.config()
	if err != nil {
		return err
	}
	m := cluster.Compile(c)
	s.model.Store(m)
	st, ready, err := s.state(m)
	if err != nil {
		return err
	}
	st.BGPPasswords = s.passwords.get()
	pending := s.proxy.Check(ctx, proxyTargets(st.LocalServices, st.Nodes, s.o.NodeName))
	s.reportProxyPending(pending)
	out, err := s.node.Reconcile(ctx, runtimecfg.Input{Model: m, State: st, IngressReady: ready, ReadAt: readAt, Drained: s.drainAsked, ProxyPending: pending})
	s.redirectWaiting.Store(out.RedirectWaiting)
	if out.Files != nil {
		s.m.Renders.Inc()
		s.m.Lonely.Set(float64(len(out.Lonely)))
		for _, l := range out.Lonely {
			s.log.Warn("instance left out: its VIPs are not served from this node", "why", l)
		}
		s.reportUnannounced(out.Unannounced)
		s.reportMissingInterfaces(out.MissingInterfaces)
		s.rememberVIPs(m, st)
		s.rememberBGP(out.Files)
		var ifaces []string
		if out.Handover.Interface != "" {
			ifaces = []string{out.Handover.Interface}
		}
		s.rememberVRRP(out.Members, vrid.RequestFor(c), ifaces)
		s.rememberWire(out.Handover)
	}
	if err == nil {
		s.rememberAnnounced(out.Announced)
	}
	for _, d := range out.Reloaded {
		s.m.Reloads.WithLabelValues(d).Inc()
		if d == frr.Name {
			s.readSessionsSoon()
		}
	}
	if len(out.Written) > 0 {
		s.log.Info("applied", "written", out.Written, "reloaded", out.Reloaded)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.appliedDigest = v1alpha1.AppliedConfig{Digest: v1alpha1.SpecDigest(c.Metadata.Name, c.Spec), Source: source}.String()
	s.mu.Unlock()
	s.publishSoon()
	// Synced: from now on a --once (the haproxy pod's, a restarted
	// sidecar's) renders this node at its real priorities.
	if err := s.o.WriteFlag(onnode.SyncedFile, true); err != nil {
		s.m.Failures.WithLabelValues("write").Inc()
		s.log.Error("cannot record the first sync", "err", err)
	}
	// What was just applied is what the next pod starts from (Once), so
	// a restart comes back with the Service addresses it held even while
	// the API is away. Failing to record it leaves the applied config in
	// force; only the next restart is at stake.
	if _, err := runtimecfg.SaveLastGood(s.o.Target, s.o.NodeName, c, st); err != nil {
		s.m.Failures.WithLabelValues("last-good").Inc()
		s.log.Error("last-good view not recorded: a restart would start from the bootstrap node list", "err", err)
	}
	if err := s.followDrainAnnotation(out.Handover); err != nil {
		s.m.Failures.WithLabelValues("drain").Inc()
		s.log.Error("following the drain annotation", "err", err)
	}
	if out.Bypassing > 0 {
		s.log.Info("reset this node's own connections to the API VIP that bypassed the redirect to haproxy: their clients reconnect through it", "connections", out.Bypassing)
	}
	if out.BypassErr != nil {
		s.log.Error("this node's own connections to the API VIP that bypass the redirect could not be reset: if the node takes the VIP, their clients stall until they notice", "err", out.BypassErr)
	}
	if out.HandoverErr != nil {
		s.m.Failures.WithLabelValues("handover").Inc()
		s.log.Error("handover table or takeover routes not written: moves of this node's VIPs may reset open connections or drop a first SYN", "err", out.HandoverErr)
	}
	return nil
}

// followDrainAnnotation drains the node when its Node asks
// (cluster.DrainAnnotation, `vipctl drain`) with the same make-before-break
// handover as keepalived's preStop, and undrains it when the annotation
// goes. Only a drain it started itself is ended here.
func (s *Sidecar) followDrainAnnotation(h onnode.Handover) error {
	switch {
	case s.drainAsked && !s.drainedByAPI:
		s.log.Info("draining: the Node asks for it", "annotation", cluster.DrainAnnotation)
		if err := s.node.Drain(h); err != nil {
			return err
		}
		s.drainedByAPI = true
	case !s.drainAsked && s.drainedByAPI:
		s.log.Info("undraining: the Node's drain annotation is gone")
		if err := s.node.Undrain(); err != nil {
			return err
		}
		s.drainedByAPI = false
	}
	return nil
}

// truncate keeps an Event message within what the API accepts.
func truncate(s string) string {
	const limit = 1000
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
