package runtimecfg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/render"
)

// SidecarOptions configure the long-running sidecar.
type SidecarOptions struct {
	OnceOptions
	// Client talks to the API with the node's own identity.
	Client kubernetes.Interface
	// Namespace holds the vipctl ConfigMap (render.Namespace).
	Namespace string
	// Debounce coalesces bursts of cluster events into one render.
	Debounce time.Duration
	// HeldInterval is how often the addresses on this node's interfaces
	// are read to publish which VIPs it holds.
	HeldInterval time.Duration
	// Addresses lists the addresses on this node's interfaces; nil reads
	// them with netlink in the current network namespace.
	Addresses func() ([]netip.Addr, error)
	// Interface names this node's interface with an address in a network;
	// nil asks netlink in the current network namespace. It is used when
	// the Node has no vipctl.io/interface annotation.
	Interface func(netip.Prefix) (string, error)
	Log       *slog.Logger
	Metrics   *Metrics
}

// Sidecar keeps one node's keepalived and haproxy in step with the
// cluster. Every cluster change triggers a debounced render of the whole
// desired state, which is applied only when it differs from what is on
// disk; anything that fails leaves the last good files in place.
type Sidecar struct {
	o       SidecarOptions
	static  *v1alpha1.ClusterVIPs
	log     *slog.Logger
	m       *Metrics
	rec     record.EventRecorder
	nodeRef *corev1.ObjectReference

	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced
	nodes     cache.GenericLister
	services  cache.GenericLister
	configMap cache.GenericLister
	slices    cache.GenericLister
	routers   map[string]cache.GenericLister

	kick chan struct{}

	mu sync.Mutex
	// liveDay2 is the last valid ConfigMap config; nil until one is seen.
	liveDay2 *v1alpha1.ClusterVIPs
	// known maps every VIP of the last render to its instance key.
	known map[netip.Addr]v1alpha1.InstanceKey
	// lastErr is why the last sync kept the last good config.
	lastErr   error
	applied   bool
	published v1alpha1.HeldVIPs
	since     map[netip.Addr]time.Time
	// node is what every sync brings in line; its LocalVIPs keep the VIPs
	// held here local for a while after they leave.
	node *Node
}

// NewSidecar loads the static config and prepares the watches. Run starts
// them.
func NewSidecar(o SidecarOptions) (*Sidecar, error) {
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.HeldInterval <= 0 {
		o.HeldInterval = time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Addresses == nil {
		o.Addresses = LinkAddresses
	}
	if o.Interface == nil {
		o.Interface = func(n netip.Prefix) (string, error) { return LocalInterface(nil, n) }
	}
	if o.Namespace == "" {
		o.Namespace = render.Namespace
	}
	static, err := v1alpha1.Load(o.Config)
	if err != nil {
		return nil, err
	}
	s := &Sidecar{
		o: o, static: static, log: o.Log.With("node", o.NodeName), m: o.Metrics,
		kick: make(chan struct{}, 1), routers: map[string]cache.GenericLister{},
		since:   map[netip.Addr]time.Time{},
		node:    NewNode(o.Target, o.NodeName, NewLocalVIPs(o.Target, HandoverGrace)),
		nodeRef: &corev1.ObjectReference{Kind: "Node", Name: o.NodeName, UID: "", APIVersion: "v1"},
	}
	s.watch()
	return s, nil
}

// strip drops what the sidecar never reads from watched objects, so 2000
// Nodes and thousands of Services cost little memory on every node.
func strip(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); len(a) > 0 {
			keep := map[string]string{}
			for _, k := range []string{cluster.InterfaceAnnotation, v1alpha1.AnnotationNodeVIPs} {
				if v, ok := a[k]; ok {
					keep[k] = v
				}
			}
			m.SetAnnotations(keep)
		}
	}
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status.Images = nil
		o.Status.VolumesAttached = nil
		o.Status.VolumesInUse = nil
		o.Status.Capacity, o.Status.Allocatable = nil, nil
		o.Status.NodeInfo = corev1.NodeSystemInfo{}
		o.Status.Conditions = nil
		o.Spec = corev1.NodeSpec{}
	case *corev1.Service:
		o.Spec.Selector = nil
		o.Spec.Ports = nil
	case *discoveryv1.EndpointSlice:
		o.Ports = nil
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			e.TargetRef, e.Hints, e.DeprecatedTopology, e.Zone, e.Hostname = nil, nil, nil, nil, nil
		}
	case *corev1.Pod:
		o.Spec = corev1.PodSpec{NodeName: o.Spec.NodeName}
		o.Status = corev1.PodStatus{Phase: o.Status.Phase, Conditions: o.Status.Conditions}
	}
	return obj, nil
}

func (s *Sidecar) factory(opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(s.o.Client, 0, append(opts, informers.WithTransform(strip))...)
	s.factories = append(s.factories, f)
	return f
}

func (s *Sidecar) inform(what string, inf cache.SharedIndexInformer) cache.GenericLister {
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.trigger() },
		UpdateFunc: func(_, _ any) { s.trigger() },
		DeleteFunc: func(any) { s.trigger() },
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		s.log.Error("adding event handler", "informer", what, "err", err)
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.m.WatchErrors.WithLabelValues(what).Inc()
		s.log.Error("cannot watch "+what+"; keeping the last good config", "err", DescribeAPIError(err))
	})
	s.synced = append(s.synced, inf.HasSynced)
	return cache.NewGenericLister(inf.GetIndexer(), schema.GroupResource{Resource: what})
}

// watch sets up the informers, each narrowed by namespace, label or field
// selector to what rendering reads.
func (s *Sidecar) watch() {
	all := s.factory()
	s.nodes = s.inform("nodes", all.Core().V1().Nodes().Informer())
	s.services = s.inform("services", all.Core().V1().Services().Informer())
	cm := s.factory(informers.WithNamespace(s.o.Namespace), informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", v1alpha1.ConfigMapName).String()
	}))
	s.configMap = s.inform("configmaps", cm.Core().V1().ConfigMaps().Informer())
	// EndpointSlices tell which nodes run ready endpoints of Local
	// Services, and which apiservers serve (default/kubernetes). Only
	// slices that belong to a Service are watched.
	eps := s.factory(informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = discoveryv1.LabelServiceName
	}))
	s.slices = s.inform("endpointslices", eps.Discovery().V1().EndpointSlices().Informer())
	for _, in := range s.static.Spec.Ingress {
		sel := labels.SelectorFromSet(in.RouterSelector).String()
		f := s.factory(informers.WithNamespace(in.RouterNamespace), informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = sel
		}))
		s.routers[in.Name] = s.inform("pods", f.Core().V1().Pods().Informer())
	}
}

func (s *Sidecar) trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run renders from the static files first (as --once does), then watches
// the cluster until ctx ends. It returns only on ctx's end or a failure to
// start; sync failures are logged, counted and retried.
func (s *Sidecar) Run(ctx context.Context) error {
	if err := InitRunFiles(s.o.Target, s.static); err != nil {
		return err
	}
	bc := record.NewBroadcaster(record.WithContext(ctx))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.o.Client.CoreV1().Events("")})
	defer bc.Shutdown()
	s.rec = bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vipctl-runtimecfg", Host: s.o.NodeName})

	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, f := range s.factories {
			f.Shutdown()
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.publishLoop(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.drainLoop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.node.Local.Run(ctx, s.o.HeldInterval, func(err error) {
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
	s.trigger()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-retry.C:
		}
		// Debounce: let a burst (a rollout, a relist) settle.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.o.Debounce):
		}
		select {
		case <-s.kick:
		default:
		}
		if err := s.Sync(ctx); err != nil {
			retry.Reset(5 * time.Second)
		}
	}
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
	if err != nil {
		s.m.Failures.WithLabelValues(reason(err)).Inc()
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

func (s *Sidecar) config() (*v1alpha1.ClusterVIPs, error) {
	objs, err := s.configMap.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		cm := o.(*corev1.ConfigMap)
		if cm.Name != v1alpha1.ConfigMapName {
			continue
		}
		c, err := ParseConfigMap(cm)
		if err == nil {
			var eff *v1alpha1.ClusterVIPs
			var drift bool
			eff, drift, err = Effective(s.static, c)
			if err == nil {
				s.m.ConfigInvalid.Set(0)
				s.m.StaticDrift.Set(b2f(drift))
				s.mu.Lock()
				s.liveDay2 = c
				s.mu.Unlock()
				return eff, nil
			}
		}
		s.m.ConfigInvalid.Set(1)
		s.mu.Lock()
		prev := s.liveDay2
		s.mu.Unlock()
		if prev == nil {
			return nil, &syncError{"config", err}
		}
		// The ConfigMap is broken: keep serving its last valid pools, and
		// say so (a sync error keeps the files as they are).
		return nil, &syncError{"config", fmt.Errorf("%w (the last valid pools stay in force)", err)}
	}
	s.m.ConfigInvalid.Set(0)
	eff, _, err := Effective(s.static, nil)
	return eff, err
}

func (s *Sidecar) sync(ctx context.Context) error {
	c, err := s.config()
	if err != nil {
		return err
	}
	m := cluster.Compile(c)
	st, ready, err := s.state(m)
	if err != nil {
		return err
	}
	out, err := s.node.Reconcile(ctx, Input{Config: c, State: st, IngressReady: ready})
	if out.Files != nil {
		s.m.Renders.Inc()
		s.m.Lonely.Set(float64(len(out.Lonely)))
		for _, l := range out.Lonely {
			s.log.Warn("instance left out: its VIPs are not served from this node", "why", l)
		}
		s.rememberVIPs(m, st)
	}
	for _, d := range out.Reloaded {
		s.m.Reloads.WithLabelValues(d).Inc()
	}
	if len(out.Written) > 0 {
		s.log.Info("applied", "written", out.Written, "reloaded", out.Reloaded)
	}
	if err != nil {
		return err
	}
	if out.HandoverErr != nil {
		s.m.Failures.WithLabelValues("handover").Inc()
		s.log.Error("handover table not written: planned moves of this node's VIPs may reset open connections", "err", out.HandoverErr)
	}
	return nil
}

// state assembles the render state from the caches, and whether a ready
// router of each IngressController runs on this node.
func (s *Sidecar) state(m *cluster.Model) (cluster.State, map[string]bool, error) {
	var o cluster.Observed
	objs, err := s.nodes.List(labels.Everything())
	if err != nil {
		return cluster.State{}, nil, err
	}
	for _, obj := range objs {
		o.Nodes = append(o.Nodes, obj.(*corev1.Node))
	}
	svcObjs, err := s.services.List(labels.Everything())
	if err != nil {
		return cluster.State{}, nil, err
	}
	for _, obj := range svcObjs {
		o.Services = append(o.Services, obj.(*corev1.Service))
	}
	sliceObjs, _ := s.slices.List(labels.Everything())
	for _, obj := range sliceObjs {
		o.Slices = append(o.Slices, obj.(*discoveryv1.EndpointSlice))
	}
	o.Routers = map[string][]*corev1.Pod{}
	ready := map[string]bool{}
	for name, lister := range s.routers {
		objs, _ := lister.List(labels.Everything())
		o.Routers[name] = pods(objs)
		_, ready[name] = cluster.RouterPlacement(o.Routers[name], s.o.NodeName)
	}
	st, skipped, orphans := m.Observe(o)
	for _, e := range skipped {
		s.log.Warn("node left out", "err", e)
	}
	if len(orphans) > 0 {
		s.log.Warn("service addresses outside every pool are not served", "addresses", orphans)
	}
	s.localInterface(m.Config, o.Nodes, st.Nodes)
	return st, ready, nil
}

// localInterface sets this node's VRRP interface from netlink when its
// Node has no vipctl.io/interface annotation: the interface that holds the
// node's address in a machine network. Other nodes' interfaces do not
// matter to this node's config.
func (s *Sidecar) localInterface(c *v1alpha1.ClusterVIPs, objs []*corev1.Node, nodes []cluster.Node) {
	for _, o := range objs {
		if o.Name == s.o.NodeName && o.Annotations[cluster.InterfaceAnnotation] != "" {
			return
		}
	}
	for i := range nodes {
		if nodes[i].Name != s.o.NodeName {
			continue
		}
		for _, mn := range c.Spec.MachineNetworks {
			network := netip.MustParsePrefix(mn)
			if !slices.ContainsFunc(nodes[i].Addresses, network.Contains) {
				continue
			}
			iface, err := s.o.Interface(network)
			if err != nil {
				s.log.Warn("keeping the configured interface", "interface", nodes[i].Interface, "err", err)
				return
			}
			nodes[i].Interface = iface
			return
		}
	}
}

func pods(objs []runtime.Object) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

// rememberVIPs records every VIP of the render with the key of the
// instance that carries it, for publishing which ones this node holds.
func (s *Sidecar) rememberVIPs(m *cluster.Model, st cluster.State) {
	known := m.VIPKeys(st)
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
}

// publishLoop reads which VIPs sit on this node's interfaces and records
// them in its Node's annotation whenever that changes.
func (s *Sidecar) publishLoop(ctx context.Context) {
	t := time.NewTicker(s.o.HeldInterval)
	defer t.Stop()
	for {
		if err := s.publish(ctx); err != nil {
			s.m.Failures.WithLabelValues("publish").Inc()
			s.log.Error("cannot publish the VIPs this node holds", "err", DescribeAPIError(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Held lists the VIPs this node holds now.
func (s *Sidecar) Held() (v1alpha1.HeldVIPs, error) {
	addrs, err := s.o.Addresses()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		return nil, nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	on := map[netip.Addr]bool{}
	var held v1alpha1.HeldVIPs
	for _, a := range addrs {
		key, ok := s.known[a.Unmap()]
		if !ok || on[a.Unmap()] {
			continue
		}
		a = a.Unmap()
		on[a] = true
		if _, ok := s.since[a]; !ok {
			s.since[a] = now
		}
		held = append(held, v1alpha1.HeldVIP{Address: a.String(), Instance: key, Since: s.since[a]})
	}
	for a := range s.since {
		if !on[a] {
			delete(s.since, a)
		}
	}
	sortHeld(held)
	return held, nil
}

func (s *Sidecar) publish(ctx context.Context) error {
	held, err := s.Held()
	if err != nil {
		return err
	}
	s.m.VIPsHeld.Set(float64(len(held)))
	s.mu.Lock()
	same := s.published != nil && reflect.DeepEqual(held, s.published) || (s.published != nil && len(held) == 0 && len(s.published) == 0)
	s.mu.Unlock()
	if same {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationNodeVIPs, held.String())
	if _, err := s.o.Client.CoreV1().Nodes().Patch(ctx, s.o.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	s.mu.Lock()
	if held == nil {
		held = v1alpha1.HeldVIPs{}
	}
	s.published = held
	s.mu.Unlock()
	s.log.Info("published held VIPs", "vips", held.String())
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

func sortHeld(h v1alpha1.HeldVIPs) {
	sort.Slice(h, func(i, j int) bool {
		return netip.MustParseAddr(h[i].Address).Less(netip.MustParseAddr(h[j].Address))
	})
}
