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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// WatchOptions say what `vipctl status --watch` follows.
type WatchOptions struct {
	Kube kubernetes.Interface
	// Namespace holds the vipctl ConfigMap.
	Namespace string
	// Config is a fixed config (-f); nil follows the ConfigMap.
	Config *v1alpha1.ClusterVIPs
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
// asks the API server for nothing between changes. It returns nil when
// ctx ends, or emit's error.
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
	all := informers.NewSharedInformerFactory(o.Kube, 0)
	nodes, services := all.Core().V1().Nodes(), all.Core().V1().Services()
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), services.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	// The kubelets' Leases tell an isolated holder from a split brain.
	// They change every 10 s on every node, so they wake nothing: a
	// frame with a VIP of several holders is computed again every
	// reachRecheck instead.
	// Without permission to list them the watch goes on without.
	factories := []informers.SharedInformerFactory{all}
	var leases cache.GenericLister
	if _, err := o.Kube.CoordinationV1().Leases(NodeLeaseNamespace).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
		nodeLeases := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(NodeLeaseNamespace))
		inf := nodeLeases.Coordination().V1().Leases().Informer()
		leases = cache.NewGenericLister(inf.GetIndexer(), coordinationv1.Resource("leases"))
		factories = append(factories, nodeLeases)
	}
	var configMaps cache.GenericNamespaceLister
	if o.Config == nil {
		// Only the one ConfigMap: a namespace may hold many.
		one := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(o.Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", v1alpha1.ConfigMapName).String()
			}))
		inf := one.Core().V1().ConfigMaps()
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return err
		}
		configMaps = cache.NewGenericLister(inf.Informer().GetIndexer(), corev1.Resource("configmaps")).ByNamespace(o.Namespace)
		factories = append(factories, one)
	}
	for _, f := range factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watching %v: the cache did not sync", typ)
			}
		}
	}

	config := o.Config
	var last *Frame
	for {
		var warnings []string
		if configMaps != nil {
			c, unknown, err := liveConfig(configMaps)
			switch {
			case err != nil && config == nil:
				return err
			case err != nil:
				warnings = append(warnings, err.Error()+" (showing the last valid config)")
			default:
				config = c
			}
			if len(unknown) > 0 {
				warnings = append(warnings, fmt.Sprintf("configmap %s/%s: %s", o.Namespace, v1alpha1.ConfigMapName, unknown))
			}
		}
		nodeList, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		svcList, err := services.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		// Sorted, so that the same objects in the cache's own order
		// make the same frame (and warnings in the same order).
		ns, ss := deref(nodeList), deref(svcList)
		sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
		sort.Slice(ss, func(i, j int) bool { return cluster.NamespacedName(&ss[i]) < cluster.NamespacedName(&ss[j]) })
		var reach Reach
		if leases != nil {
			objs, err := leases.List(labels.Everything())
			if err != nil {
				return err
			}
			list := make([]coordinationv1.Lease, 0, len(objs))
			for _, obj := range objs {
				if l, ok := obj.(*coordinationv1.Lease); ok {
					list = append(list, *l)
				}
			}
			reach = ReachFromLeases(list)
		}
		f := frame(config, ns, ss, reach, warnings)
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

// deref copies the cache's objects out (they are shared and read-only).
func deref[T any](list []*T) []T {
	out := make([]T, 0, len(list))
	for _, p := range list {
		out = append(out, *p)
	}
	return out
}
