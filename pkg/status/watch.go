package status

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
)

// WatchOptions say what `vipctl status --watch` follows.
type WatchOptions struct {
	Kube kubernetes.Interface
	// Namespace holds the vipctl ConfigMap.
	Namespace string
	// Config is a fixed config (-f); nil follows the ConfigMap, or the
	// ClusterVIPs object where it is the live config.
	Config *v1alpha1.ClusterVIPs
	// Dynamic, when set, reads the ClusterVIPs object: its verdict under
	// each frame, and the live config from it on a migrated cluster.
	Dynamic dynamic.Interface
}

// Frame is one state of the cluster as the watch shows it.
type Frame struct {
	Report Report
	// Drained names the nodes asked to drain.
	Drained []string
	// Warnings are what the one-shot status prints on stderr: unparsable
	// annotations, a ConfigMap that no longer parses (the last valid
	// config is kept meanwhile), and the fields of the ConfigMap a newer
	// vipctl wrote (ignored).
	Warnings []string
}

// ErrNoConfigMap is the watch's answer when it follows the ConfigMap and
// there is none to start from.
var ErrNoConfigMap = errors.New("no ConfigMap " + v1alpha1.ConfigMapName)

// Watch calls emit with the first frame and then with every frame that
// differs from the last one emitted: an informer on the Nodes, the
// Services and (without a fixed config) the ConfigMap wakes it, so it
// asks the API server for nothing between changes; while a VIP has
// several holders it looks again every reachRecheck, for what the
// kubelets' Leases say. It returns nil when ctx ends, or emit's error.
func Watch(ctx context.Context, o WatchOptions, emit func(Frame) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default: // a wake-up is pending: it reads the newest state anyway
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	c, err := newCaches(ctx, o, handler)
	if err != nil {
		return err
	}
	if err := c.watchObjects(ctx, o.Dynamic, handler); err != nil {
		return err
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	defer c.shutdown()
	if ctx.Err() != nil {
		return nil
	}

	config := o.Config
	var last *Frame
	for {
		var warnings []string
		if c.configMaps != nil {
			live, unknown, err := liveConfig(c.configMaps)
			switch {
			case err != nil && config == nil:
				return err
			case err != nil:
				warnings = append(warnings, err.Error()+" (showing the last valid config)")
			default:
				config = live
			}
			if len(unknown) > 0 {
				warnings = append(warnings, fmt.Sprintf("configmap %s/%s: %s", o.Namespace, v1alpha1.ConfigMapName, unknown))
			}
		}
		obj := c.clusterVIPsObject(config.Metadata.Name)
		if live, ok, err := configsource.ReadSource(obj); ok && c.configMaps != nil {
			if err != nil {
				warnings = append(warnings, err.Error()+" (showing the ConfigMap's config)")
			} else {
				config = live
			}
		}
		ns, ss, reach, err := c.objects()
		if err != nil {
			return err
		}
		f := frame(config, ns, ss, reach, warnings)
		if obj != nil {
			if f.Report.Object, err = verdictOf(obj); err != nil {
				f.Warnings = append(f.Warnings, err.Error())
			}
		}
		if last == nil || !reflect.DeepEqual(*last, f) {
			if err := emit(f); err != nil {
				return err
			}
			last = &f
		}
		var recheck <-chan time.Time
		if slices.ContainsFunc(f.Report.VIPs, func(v VIPStatus) bool { return v.State == StateSplitBrain || v.State == StateIsolated }) {
			recheck = time.After(reachRecheck)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-recheck:
		}
	}
}

// caches are the watch's informers and what it lists from them.
type caches struct {
	nodes    listersv1.NodeLister
	services listersv1.ServiceLister
	// leases is nil without permission to list the kubelets' Leases,
	// configMaps with a fixed config.
	leases     cache.GenericLister
	configMaps cache.GenericNamespaceLister
	factories  []informers.SharedInformerFactory
	// clusterVIPs and dynamic are nil where the ClusterVIPs resource is
	// not served or not allowed (watchObjects).
	clusterVIPs cache.GenericLister
	dynamic     dynamicinformer.DynamicSharedInformerFactory
}

// start starts the informers and waits until their caches are synced:
// nil when ctx ends first (the watch ends without a frame).
func (c *caches) start(ctx context.Context) error {
	synced := func(typ any, ok bool) error {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("watching %v: the cache did not sync", typ)
		}
		return nil
	}
	for _, f := range c.factories {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if err := synced(typ, ok); err != nil {
				return err
			}
		}
	}
	if c.dynamic != nil {
		c.dynamic.Start(ctx.Done())
		for typ, ok := range c.dynamic.WaitForCacheSync(ctx.Done()) {
			if err := synced(typ, ok); err != nil {
				return err
			}
		}
	}
	return nil
}

// shutdown stops the informers start started.
func (c *caches) shutdown() {
	for _, f := range c.factories {
		f.Shutdown()
	}
	if c.dynamic != nil {
		c.dynamic.Shutdown()
	}
}

// newCaches sets up informers on the Nodes, the Services and (without a
// fixed config) the one ConfigMap, each calling handler, and on the
// kubelets' Leases when allowed: those change every 10 s on every node,
// so they call nothing; a frame with a VIP of several holders is
// computed again every reachRecheck instead.
func newCaches(ctx context.Context, o WatchOptions, handler cache.ResourceEventHandler) (*caches, error) {
	all := informers.NewSharedInformerFactory(o.Kube, 0)
	c := &caches{nodes: all.Core().V1().Nodes().Lister(), services: all.Core().V1().Services().Lister(), factories: []informers.SharedInformerFactory{all}}
	for _, inf := range []cache.SharedIndexInformer{all.Core().V1().Nodes().Informer(), all.Core().V1().Services().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	if _, err := o.Kube.CoordinationV1().Leases(NodeLeaseNamespace).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
		nodeLeases := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(NodeLeaseNamespace))
		inf := nodeLeases.Coordination().V1().Leases().Informer()
		c.leases = cache.NewGenericLister(inf.GetIndexer(), coordinationv1.Resource("leases"))
		c.factories = append(c.factories, nodeLeases)
	}
	if o.Config == nil {
		// Only the one ConfigMap: a namespace may hold many.
		one := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(o.Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", v1alpha1.ConfigMapName).String()
			}))
		inf := one.Core().V1().ConfigMaps()
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return nil, err
		}
		c.configMaps = cache.NewGenericLister(inf.Informer().GetIndexer(), corev1.Resource("configmaps")).ByNamespace(o.Namespace)
		c.factories = append(c.factories, one)
	}
	return c, nil
}

// objects lists the cached Nodes and Services, sorted so that the same
// objects in the cache's own order make the same frame (and warnings in
// the same order), and what the Leases say.
func (c *caches) objects() ([]corev1.Node, []corev1.Service, Reach, error) {
	nodeList, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, Reach{}, err
	}
	svcList, err := c.services.List(labels.Everything())
	if err != nil {
		return nil, nil, Reach{}, err
	}
	ns, ss := Deref(nodeList), Deref(svcList)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	sort.Slice(ss, func(i, j int) bool { return cluster.NamespacedName(&ss[i]) < cluster.NamespacedName(&ss[j]) })
	if c.leases == nil {
		return ns, ss, Reach{}, nil
	}
	objs, err := c.leases.List(labels.Everything())
	if err != nil {
		return nil, nil, Reach{}, err
	}
	list := make([]coordinationv1.Lease, 0, len(objs))
	for _, obj := range objs {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			list = append(list, *l)
		}
	}
	return ns, ss, ReachFromLeases(list), nil
}

// reachRecheck is how often the watch looks at the Leases again while a
// VIP has several holders.
const reachRecheck = 2 * time.Second

// frame is one state, as the one-shot status computes it.
func frame(c *v1alpha1.ClusterVIPs, nodes []corev1.Node, services []corev1.Service, reach Reach, warnings []string) Frame {
	report, errs := NewReport(c, nodes, services)
	report.Classify(reach, time.Now())
	for _, e := range errs {
		warnings = append(warnings, e.Error())
	}
	return Frame{Report: report, Drained: Drained(nodes), Warnings: warnings}
}

// liveConfig is the ConfigMap's config from the watch's cache, and the
// fields a newer vipctl wrote into it (ignored).
func liveConfig(l cache.GenericNamespaceLister) (*v1alpha1.ClusterVIPs, v1alpha1.UnknownFields, error) {
	obj, err := l.Get(v1alpha1.ConfigMapName)
	if err != nil {
		return nil, nil, ErrNoConfigMap
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, nil, fmt.Errorf("configmap %s: unexpected %T", v1alpha1.ConfigMapName, obj)
	}
	return cluster.ReadConfigMap(cm)
}

// Deref copies a cache's objects out (they are shared and read-only),
// for the functions here that take values: the watch's and the
// ClusterVIPs status writer's listers.
func Deref[T any](list []*T) []T {
	out := make([]T, 0, len(list))
	for _, p := range list {
		out = append(out, *p)
	}
	return out
}
