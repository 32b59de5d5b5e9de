package allocator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/statuswriter"
)

// Options configure the Controller.
type Options struct {
	Client kubernetes.Interface
	// EventClient records the Events (nil: Client). A client of its own
	// keeps them from taking the status writes' share of the client's
	// request rate: every allocation records one, and a burst of new
	// Services would otherwise be allocated at half the rate.
	EventClient kubernetes.Interface
	// Namespace holds the vipctl ConfigMap and the leader Lease.
	Namespace string
	// Identity names this replica in the Lease (the pod name).
	Identity string
	// Lease timing (client-go leader election). Zero: 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// SyncTimeout bounds one Service's sync, its status write included
	// (10 s when zero). One worker allocates, so a write stuck on a dead
	// connection or on an apiserver waiting for etcd would hold every
	// later allocation; it fails instead and the Service is retried.
	SyncTimeout time.Duration
	// Dynamic, when set, has the leader write the status of the
	// ClusterVIPs objects too (pkg/statuswriter), and read the pools from
	// the cluster's object once it is the live config
	// (pkg/configsource).
	Dynamic dynamic.Interface
	// ObjectProbe is how often the leader looks again for the
	// ClusterVIPs resource while it is not served (60 s when zero).
	ObjectProbe time.Duration
	Log         *slog.Logger
	Metrics     *Metrics
}

// Controller allocates pool addresses to Services while it leads.
type Controller struct {
	o   Options
	log *slog.Logger
	m   *Metrics

	mu      sync.Mutex
	leading bool
	synced  bool
}

// NewController validates the options.
func NewController(o Options) (*Controller, error) {
	if o.Client == nil || o.Namespace == "" || o.Identity == "" {
		return nil, errors.New("allocator: client, namespace and identity are required")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Controller{o: o, log: o.Log.With("identity", o.Identity), m: o.Metrics}, nil
}

// Ready tells whether this replica is healthy: leading with synced caches,
// or standing by.
func (c *Controller) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leading && !c.synced {
		return errors.New("leading, caches not synced yet")
	}
	return nil
}

// Leading tells whether this replica holds the Lease.
func (c *Controller) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// Run campaigns for the Lease until ctx ends, allocating while it leads.
// Losing the Lease stops all writes; the replica then campaigns again and,
// leading again, rebuilds its books from the Services' statuses.
func (c *Controller) Run(ctx context.Context) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: v1alpha1.AllocatorLeaseName, Namespace: c.o.Namespace},
		Client:     c.o.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.o.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: "vipctl-allocator",
			LeaseDuration: c.o.LeaseDuration, RenewDeadline: c.o.RenewDeadline, RetryPeriod: c.o.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					c.setLeading(true)
					c.log.Info("leading: allocating")
					if err := c.lead(lctx); err != nil && lctx.Err() == nil {
						c.log.Error("allocator stopped", "err", err)
					}
				},
				OnStoppedLeading: func() {
					c.setLeading(false)
					c.log.Info("not leading: no more writes")
				},
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx)
	}
	return nil
}

func (c *Controller) setLeading(on bool) {
	c.mu.Lock()
	c.leading, c.synced = on, false
	c.mu.Unlock()
	c.m.Leader.Set(b2f(on))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// term is one leadership term: fresh caches and books.
type term struct {
	c        *Controller
	alloc    *Allocator
	services corelisters.ServiceLister
	configs  corelisters.ConfigMapLister
	queue    workqueue.TypedRateLimitingInterface[string]
	rec      record.EventRecorder
	pools    []v1alpha1.ServicePool
	// class is which Services the config has vipctl serve.
	class     cluster.Class
	metricsAt time.Time
	// unknown is what reportUnknownFields last said.
	unknown string
	// ctx is the term's; object follows the cluster's ClusterVIPs
	// object once the ConfigMap has named the cluster (nil before, and
	// without Options.Dynamic).
	ctx    context.Context
	object *configsource.Object
	// cfg is the live config in force; nodes the Nodes' own addresses
	// as the status writer last saw them (nodesMu: it runs on its own).
	cfg     *v1alpha1.ClusterVIPs
	nodesMu sync.Mutex
	nodes   []v1alpha1.NodeAddresses
}

func (c *Controller) lead(ctx context.Context) error {
	t := &term{c: c, alloc: New(nil), ctx: ctx,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second))}
	defer t.queue.ShutDown()
	bc := record.NewBroadcaster(record.WithContext(ctx))
	events := c.o.EventClient
	if events == nil {
		events = c.o.Client
	}
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer bc.Shutdown()
	t.rec = bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: v1alpha1.EventSourceAllocator})

	svcF := informers.NewSharedInformerFactoryWithOptions(c.o.Client, 0, informers.WithTransform(stripService))
	cmF := informers.NewSharedInformerFactoryWithOptions(c.o.Client, 0, informers.WithNamespace(c.o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", v1alpha1.ConfigMapName).String()
		}))
	svcInf := svcF.Core().V1().Services()
	cmInf := cmF.Core().V1().ConfigMaps()
	t.services, t.configs = svcInf.Lister(), cmInf.Lister()
	var status *statuswriter.Writer
	if c.o.Dynamic != nil {
		status = statuswriter.New(statuswriter.Options{Client: c.o.Client, Dynamic: c.o.Dynamic, Services: t.services,
			Probe: c.o.ObjectProbe, Log: c.log.With("writer", "status"), Observe: c.m.setConditions, ObserveNodes: t.observeNodes})
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			t.queue.Add(key)
		}
		if status != nil {
			status.Kick()
		}
	}
	_, _ = svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	})
	all := func(any) {
		t.queue.Add(configKey)
		if status != nil {
			status.Wake()
		}
	}
	_, _ = cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all})
	for what, inf := range map[string]cache.SharedIndexInformer{watchedResources[0]: svcInf.Informer(), watchedResources[1]: cmInf.Informer()} {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			c.m.WatchErrors.WithLabelValues(what).Inc()
			c.log.Error("cannot watch "+what, "err", cluster.DescribeAPIError(err))
		})
	}
	svcF.Start(ctx.Done())
	cmF.Start(ctx.Done())
	defer svcF.Shutdown()
	defer cmF.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, cmInf.Informer().HasSynced) {
		return ctx.Err()
	}
	t.loadConfig()
	t.rebuild()
	c.mu.Lock()
	c.synced = true
	c.mu.Unlock()
	c.log.Info("books rebuilt from Service statuses", "addresses", len(t.alloc.byAddr))
	if status != nil {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		defer func() { stop(); <-done }()
		go func() {
			defer close(done)
			if err := status.Run(wctx); err != nil && wctx.Err() == nil {
				c.log.Error("status writer stopped", "err", err)
			}
		}()
	}
	// Everything once, in creation order, so older Services win.
	svcs, _ := t.services.List(labels.Everything())
	cluster.SortByAge(svcs)
	for _, s := range svcs {
		t.queue.Add(s.Namespace + "/" + s.Name)
	}
	for t.next(ctx) {
	}
	return nil
}

const (
	configKey = "\x00config"
	// nodesKey: the Nodes' own addresses changed.
	nodesKey = "\x00nodes"
)

// observeNodes takes the Nodes' own addresses from the status writer
// and, when they changed, has the reserved addresses set again.
func (t *term) observeNodes(nodes []v1alpha1.NodeAddresses) {
	t.nodesMu.Lock()
	changed := !reflect.DeepEqual(nodes, t.nodes)
	if changed {
		t.nodes = nodes
	}
	t.nodesMu.Unlock()
	if changed {
		t.queue.Add(nodesKey)
	}
}

// reserve has the allocator give out none of the addresses the live
// config and the Nodes say must stay free (v1alpha1.ReservedAddresses):
// a Node's own address in a pool (a node that joined after render
// --nodes checked the pools) is never a Service's, and a Service that
// holds one is given another, as one holding a network's broadcast
// address is. Known once the status writer runs (the ClusterVIPs CRD
// installed, the ClusterRole of v0.2.0 or later), which also reports
// such a pool (Degraded, InvalidSpec).
func (t *term) reserve() {
	if t.cfg == nil {
		return
	}
	t.nodesMu.Lock()
	nodes := t.nodes
	t.nodesMu.Unlock()
	t.alloc.SetReserved(t.cfg.ReservedAddresses(nodes))
}

// stripService drops what allocation never reads. The selector stays:
// whether two Services may share an address depends on it (BackendKey).
func stripService(obj any) (any, error) {
	if s, ok := obj.(*corev1.Service); ok {
		s.ManagedFields = nil
	}
	return obj, nil
}

func (t *term) next(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit || ctx.Err() != nil {
		return false
	}
	defer t.queue.Done(key)
	var err error
	switch key {
	case nodesKey:
		t.reserve()
		for _, k := range t.alloc.HoldingReserved() {
			t.queue.Add(k)
		}
	case configKey:
		t.loadConfig()
		svcs, _ := t.services.List(labels.Everything())
		cluster.SortByAge(svcs)
		for _, s := range svcs {
			t.queue.Add(s.Namespace + "/" + s.Name)
		}
	default:
		syncCtx, cancel := context.WithTimeout(ctx, t.c.o.SyncTimeout)
		err = t.sync(syncCtx, key)
		cancel()
	}
	if err != nil {
		t.c.log.Error("will retry", "service", key, "err", cluster.DescribeAPIError(err))
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	t.c.updatePoolMetrics(t)
	return true
}

// loadConfig reads the pools from the cluster's ClusterVIPs object when
// it is the live config, else from the ConfigMap, keeping the last valid
// ones when the source is missing or invalid.
func (t *term) loadConfig() {
	if t.object != nil {
		if cfg, ok, err := t.object.Get(); ok {
			if err != nil {
				t.c.m.ConfigInvalid.Set(1)
				t.c.log.Error("invalid ClusterVIPs object; the last valid pools stay in force", "err", err)
				if ref := t.object.Ref(); ref != nil {
					t.rec.Event(ref, corev1.EventTypeWarning, "InvalidConfig", truncate(err.Error()))
				}
				return
			}
			t.setConfig(cfg)
			return
		}
	}
	cm, err := t.configs.ConfigMaps(t.c.o.Namespace).Get(v1alpha1.ConfigMapName)
	if apierrors.IsNotFound(err) {
		if t.pools == nil {
			t.c.log.Warn("no ConfigMap " + t.c.o.Namespace + "/" + v1alpha1.ConfigMapName + ": no pools, nothing allocated")
		}
		return
	}
	if err != nil {
		return
	}
	cfg, unknown, err := cluster.ReadConfigMap(cm)
	if err != nil {
		t.c.m.ConfigInvalid.Set(1)
		t.c.log.Error("invalid ConfigMap; the last valid pools stay in force", "err", err)
		t.rec.Event(cm, corev1.EventTypeWarning, "InvalidConfig", truncate(err.Error()))
		return
	}
	t.reportUnknownFields(cm, unknown)
	t.setConfig(cfg)
	if t.object == nil && t.c.o.Dynamic != nil {
		t.object = configsource.NewObject(t.c.o.Dynamic, cfg.Metadata.Name, t.c.o.ObjectProbe, t.c.log, func() { t.queue.Add(configKey) })
		go t.object.Run(t.ctx)
	}
	if t.object != nil && configsource.Migrated(cm) {
		t.object.Wake()
	}
}

// setConfig takes the pools and the class of a valid live config.
func (t *term) setConfig(cfg *v1alpha1.ClusterVIPs) {
	t.c.m.ConfigInvalid.Set(0)
	t.pools, t.class, t.cfg = cfg.Spec.ServicePools, cluster.ClassOf(cfg), cfg
	t.alloc.SetPools(t.pools)
	t.reserve()
	t.c.m.setPools(t.pools)
}

// rebuild records every served Service's status addresses, oldest first;
// a later Service holding an address an older one has keeps nothing (its
// sync re-allocates) and gets an Event.
func (t *term) rebuild() {
	svcs, _ := t.services.List(labels.Everything())
	cluster.SortByAge(svcs)
	for _, s := range svcs {
		t.claimExternalIPs(s)
		if !t.class.Serves(s) {
			continue
		}
		ips := statusAddrs(s)
		if len(ips) == 0 {
			continue
		}
		r := request(s)
		if err := t.alloc.Assign(r, ips); err != nil {
			t.c.log.Error("status address held twice; the newer Service gets a new one", "service", r.Key, "err", err)
			t.rec.Event(s, corev1.EventTypeWarning, string(ReasonInUse), truncate(err.Error()))
		}
	}
}

// EventExternalIPRefused is the reason of the Warning Event on a Service
// whose external IP a pool with externalIPs does not announce for it, or
// another Service holds; the message starts with the Reason.
const EventExternalIPRefused = "ExternalIPRefused"

// externalKey is the allocator's key for the external IPs a Service names,
// apart from its load-balancer addresses (key).
func externalKey(key string) string { return key + " externalIPs" }

// claimExternalIPs books the external IPs of s that a pool announces
// (cluster.Pools.ExternalIPs), so that no Service is given one, and
// reports on s each one the pool refuses or another Service holds. An
// address someone else holds stays announced (for its holder): two
// Services on one address and port is for their owners to settle, and
// the Event says who.
func (t *term) claimExternalIPs(s *corev1.Service) {
	key := externalKey(cluster.NamespacedName(s))
	var want []netip.Addr
	for _, e := range t.alloc.set.ExternalIPs(s, t.class) {
		if e.Err != nil {
			t.rec.Event(s, corev1.EventTypeWarning, EventExternalIPRefused, truncate(fmt.Sprintf("%s: %s", ReasonNotAllowed, e.Err)))
			continue
		}
		want = append(want, e.Addr)
	}
	if slices.Equal(t.alloc.Addresses(key), want) {
		return
	}
	t.alloc.Release(key)
	r := Request{Key: key, Namespace: s.Namespace}
	for _, a := range want {
		if err := t.alloc.Assign(r, append(t.alloc.Addresses(key), a)); err != nil {
			t.rec.Event(s, corev1.EventTypeWarning, EventExternalIPRefused, truncate(fmt.Sprintf("%s: external IP %s", ReasonOf(err), err)))
		}
	}
}

// sync brings one Service's status in line with the books.
func (t *term) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	s, err := t.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if len(t.alloc.Addresses(key)) > 0 {
			t.c.log.Info("released", "service", key, "addresses", t.alloc.Addresses(key))
		}
		t.alloc.Release(key)
		t.alloc.Release(externalKey(key))
		return nil
	}
	if err != nil {
		return err
	}
	t.claimExternalIPs(s)
	if !t.class.Serves(s) {
		had := t.alloc.Addresses(key)
		t.alloc.Release(key)
		// A Service that stopped being ours keeps no address of ours.
		if len(had) > 0 && slices.Equal(statusAddrs(s), had) {
			return t.writeStatus(ctx, s, nil, "IPReleased", "released "+fmtAddrs(had)+": no longer a LoadBalancer Service vipctl serves ("+t.class.Describe()+")")
		}
		return nil
	}
	r := request(s)
	for _, a := range r.Requested {
		if !a.IsValid() {
			t.failed(s, &Error{Reason: ReasonBadRequest, Msg: fmt.Sprintf("annotation %s: %q is not a list of IP addresses", v1alpha1.AnnotationLoadBalancerIPs, s.Annotations[v1alpha1.AnnotationLoadBalancerIPs])})
			return nil
		}
	}
	cur := statusAddrs(s)
	// An address outside every pool (the pool shrank) is kept: `vipctl
	// update --force` releases such addresses, not the allocator.
	if len(cur) > 0 && slices.Equal(t.alloc.Addresses(key), cur) && slices.ContainsFunc(cur, func(a netip.Addr) bool { return t.alloc.PoolOf(a) == "" }) {
		return nil
	}
	if len(cur) > 0 && len(t.alloc.Addresses(key)) == 0 {
		// A Service that has just become one vipctl serves (its class or
		// type changed, or the config's spec.loadBalancerClass did) keeps
		// the addresses its status holds where the books allow them, as
		// at start-up (rebuild): another implementation's Service taken
		// over without a new address. Allocate keeps them if they satisfy
		// the request.
		_ = t.alloc.Assign(r, cur)
	}
	got, err := t.alloc.Allocate(r)
	if err != nil {
		t.failed(s, err)
		return nil
	}
	t.warnIncompatible(s, &r)
	if slices.Equal(cur, got) {
		return nil
	}
	if err := t.writeStatus(ctx, s, got, "IPAllocated", "assigned "+fmtAddrs(got)+" from pool "+t.alloc.PoolOf(got[0])); err != nil {
		// Not written: forget it, the retry allocates again.
		t.alloc.Release(key)
		if len(cur) > 0 {
			_ = t.alloc.Assign(r, cur)
		}
		return err
	}
	t.c.m.Allocations.Inc()
	return nil
}

func (t *term) failed(s *corev1.Service, err error) {
	reason := ReasonOf(err)
	t.c.m.Failures.WithLabelValues(string(reason)).Inc()
	t.c.log.Warn("cannot allocate", "service", s.Namespace+"/"+s.Name, "reason", reason, "err", err)
	t.rec.Event(s, corev1.EventTypeWarning, "AllocationFailed", fmt.Sprintf("%s: %s", reason, err))
}

func (t *term) writeStatus(ctx context.Context, s *corev1.Service, addrs []netip.Addr, reason, msg string) error {
	out := s.DeepCopy()
	out.Status.LoadBalancer.Ingress = nil
	vip := corev1.LoadBalancerIPModeVIP
	for _, a := range addrs {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a.String(), IPMode: &vip})
	}
	if _, err := t.c.o.Client.CoreV1().Services(s.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing status of %s/%s: %w", s.Namespace, s.Name, err)
	}
	t.rec.Event(s, corev1.EventTypeNormal, reason, msg)
	t.c.log.Info(msg, "service", s.Namespace+"/"+s.Name)
	return nil
}

func fmtAddrs(addrs []netip.Addr) string {
	ss := make([]string, 0, len(addrs))
	for _, a := range addrs {
		ss = append(ss, a.String())
	}
	return strings.Join(ss, ", ")
}

func truncate(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "…"
	}
	return s
}
