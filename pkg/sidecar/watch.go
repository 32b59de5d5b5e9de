package sidecar

import (
	"context"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// strip keeps of each watched object only what the sidecar reads, so
// 2000 Nodes and thousands of Services and EndpointSlices cost little
// memory and garbage on every node, and changed can compare two versions
// field by field. It keeps a list, not a list of what to drop: a field
// rendering starts to read must be added here and to changed
// (TestChangedComparesWhatStripKeeps holds the two together).
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return &corev1.Node{ObjectMeta: keptMeta(&o.ObjectMeta, o.Labels, kept(o.Annotations, keptNodeAnnotations...)),
			Status: corev1.NodeStatus{Addresses: o.Status.Addresses}}, nil
	case *corev1.Service:
		out := &corev1.Service{ObjectMeta: keptMeta(&o.ObjectMeta, nil, nil), Spec: corev1.ServiceSpec{
			Type: o.Spec.Type, LoadBalancerClass: o.Spec.LoadBalancerClass, ExternalTrafficPolicy: o.Spec.ExternalTrafficPolicy,
			ExternalIPs: o.Spec.ExternalIPs, HealthCheckNodePort: o.Spec.HealthCheckNodePort}}
		for _, in := range o.Status.LoadBalancer.Ingress {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in.IP})
		}
		return out, nil
	case *discoveryv1.EndpointSlice:
		out := &discoveryv1.EndpointSlice{ObjectMeta: keptMeta(&o.ObjectMeta, kept(o.Labels, discoveryv1.LabelServiceName), nil)}
		if len(o.Endpoints) > 0 {
			out.Endpoints = make([]discoveryv1.Endpoint, len(o.Endpoints))
		}
		for i, e := range o.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{Addresses: e.Addresses, NodeName: e.NodeName,
				Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready, Serving: e.Conditions.Serving, Terminating: e.Conditions.Terminating}}
		}
		return out, nil
	case *corev1.Pod:
		out := &corev1.Pod{ObjectMeta: keptMeta(&o.ObjectMeta, nil, nil), Spec: corev1.PodSpec{NodeName: o.Spec.NodeName},
			Status: corev1.PodStatus{Phase: o.Status.Phase}}
		if ready, ok := podReadyCondition(o); ok {
			out.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		}
		return out, nil
	case metav1.Object: // the ConfigMap: kept whole but for its managed fields
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// keptMeta is the metadata strip keeps: identity, age, deletion, and the
// labels and annotations given.
func keptMeta(m *metav1.ObjectMeta, labels, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, Labels: labels, Annotations: annotations}
}

// nodeAnnotations are the annotations of a Node that the sidecar reads.
// Not the VIPs each node publishes (v1alpha1.AnnotationNodeVIPs), which
// nothing renders from: each publication made every node render again,
// two or three renders for every Service added to a small cluster.
//
// Kept but no change: what each node heard on the wire
// (v1alpha1.AnnotationNodeWire), which the holder of a VIP reads to learn
// whether the other members hear it (heal.go), at its own pace.
var nodeAnnotations = []string{cluster.InterfaceAnnotation, cluster.DrainAnnotation}

var keptNodeAnnotations = append(slices.Clip(nodeAnnotations), v1alpha1.AnnotationNodeWire)

// kept is m narrowed to keys (an EndpointSlice's Service label, a Node's
// annotations); nil when none is set.
func kept(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// sameKeys tells whether a and b agree on keys (each set to the same
// value, or unset in both).
func sameKeys(a, b map[string]string, keys ...string) bool {
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if va != vb || oka != okb {
			return false
		}
	}
	return true
}

// podReadyCondition is the status of a pod's Ready condition, the first
// one, as cluster.RouterPlacement reads it.
func podReadyCondition(p *corev1.Pod) (corev1.ConditionStatus, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status, true
		}
	}
	return "", false
}

func (s *Sidecar) factory(opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(s.o.Client, 0, append(opts, informers.WithTransform(strip))...)
	s.factories = append(s.factories, f)
	return f
}

// inform asks for a sync on every event of inf that can change the
// render: not on an update that changed nothing strip kept (a Node's
// status post that only moved its heartbeats), nor, when read is given,
// on an object rendering does not read (read(obj) false before and after).
func (s *Sidecar) inform(what string, inf cache.SharedIndexInformer, read func(obj any) bool) cache.GenericLister {
	sync, ignored := s.m.WatchEvents.WithLabelValues(what, "sync"), s.m.WatchEvents.WithLabelValues(what, "ignored")
	if read == nil {
		read = func(any) bool { return true }
	}
	event := func(matters bool) {
		if !matters {
			ignored.Inc()
			return
		}
		sync.Inc()
		s.trigger()
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { event(read(obj)) },
		UpdateFunc: func(old, obj any) { event(changed(old, obj) && (read(old) || read(obj))) },
		DeleteFunc: func(obj any) { event(read(obj)) },
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		s.log.Error("adding event handler", "informer", what, "err", err)
	}
	// The series exists at 0 before the first error, which increase()
	// (VipctlSidecarAPIUnreachable) would not see otherwise.
	s.m.WatchErrors.WithLabelValues(what)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.m.WatchErrors.WithLabelValues(what).Inc()
		s.log.Error("cannot watch "+what+"; keeping the last good config", "err", cluster.DescribeAPIError(err))
	})
	s.synced = append(s.synced, inf.HasSynced)
	return cache.NewGenericLister(inf.GetIndexer(), schema.GroupResource{Resource: what})
}

// watch sets up the informers, each narrowed by namespace, label or field
// selector to what rendering reads.
func (s *Sidecar) watch() {
	all := s.factory()
	s.nodes = s.inform("nodes", all.Core().V1().Nodes().Informer(), nil)
	s.services = s.inform("services", all.Core().V1().Services().Informer(), s.addressedService)
	if _, err := all.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.followEarly(nil, obj) },
		UpdateFunc: s.followEarly,
	}); err != nil {
		s.log.Error("adding event handler", "informer", "services", "err", err)
	}
	cm := s.factory(informers.WithNamespace(s.o.Namespace), informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", v1alpha1.ConfigMapName).String()
	}))
	s.configMap = s.inform("configmaps", cm.Core().V1().ConfigMaps().Informer(), nil)
	// EndpointSlices tell which nodes run ready endpoints of Local
	// Services, and which apiservers serve (default/kubernetes). Only
	// slices that belong to a Service are watched.
	eps := s.factory(informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = discoveryv1.LabelServiceName
	}))
	s.slices = s.inform("endpointslices", eps.Discovery().V1().EndpointSlices().Informer(), s.sliceRead)
	for _, in := range s.static.Spec.Ingress {
		sel := labels.SelectorFromSet(in.RouterSelector).String()
		f := s.factory(informers.WithNamespace(in.RouterNamespace), informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = sel
		}))
		s.routers[in.Name] = s.inform("pods", f.Core().V1().Pods().Informer(), nil)
	}
}

// changed tells whether an update changed what strip keeps of an object.
// A Node's status post that only moved its conditions' heartbeats (which
// strip drops) changes its resourceVersion alone; at 2000 nodes those
// posts would otherwise render all the time. It runs for every event of
// every watch, so the kinds strip narrows are compared field by field,
// without a copy or reflection (a deep copy and a reflective deep
// equality cost 30-45 µs and 85 allocations per event).
func changed(old, obj any) bool {
	om, okm := old.(metav1.Object)
	nm, okn := obj.(metav1.Object)
	if !okm || !okn {
		return true
	}
	if rv := nm.GetResourceVersion(); rv != "" && rv == om.GetResourceVersion() {
		return false // a relist: the same object
	}
	switch a := old.(type) {
	case *corev1.Node:
		b, ok := obj.(*corev1.Node)
		return !ok || !sameMeta(&a.ObjectMeta, &b.ObjectMeta) || !maps.Equal(a.Labels, b.Labels) ||
			!sameKeys(a.Annotations, b.Annotations, nodeAnnotations...) || !slices.Equal(a.Status.Addresses, b.Status.Addresses)
	case *corev1.Service:
		b, ok := obj.(*corev1.Service)
		return !ok || !sameMeta(&a.ObjectMeta, &b.ObjectMeta) || a.Spec.Type != b.Spec.Type ||
			!samePtr(a.Spec.LoadBalancerClass, b.Spec.LoadBalancerClass) || a.Spec.ExternalTrafficPolicy != b.Spec.ExternalTrafficPolicy ||
			!slices.Equal(a.Spec.ExternalIPs, b.Spec.ExternalIPs) || a.Spec.HealthCheckNodePort != b.Spec.HealthCheckNodePort ||
			!slices.EqualFunc(a.Status.LoadBalancer.Ingress, b.Status.LoadBalancer.Ingress, func(x, y corev1.LoadBalancerIngress) bool { return x.IP == y.IP })
	case *discoveryv1.EndpointSlice:
		b, ok := obj.(*discoveryv1.EndpointSlice)
		return !ok || !sameMeta(&a.ObjectMeta, &b.ObjectMeta) || !sameKeys(a.Labels, b.Labels, discoveryv1.LabelServiceName) ||
			!slices.EqualFunc(a.Endpoints, b.Endpoints, func(x, y discoveryv1.Endpoint) bool {
				return slices.Equal(x.Addresses, y.Addresses) && samePtr(x.NodeName, y.NodeName) && samePtr(x.Conditions.Ready, y.Conditions.Ready) &&
					samePtr(x.Conditions.Serving, y.Conditions.Serving) && samePtr(x.Conditions.Terminating, y.Conditions.Terminating)
			})
	case *corev1.Pod:
		b, ok := obj.(*corev1.Pod)
		if !ok || !sameMeta(&a.ObjectMeta, &b.ObjectMeta) || a.Spec.NodeName != b.Spec.NodeName || a.Status.Phase != b.Status.Phase {
			return true
		}
		ra, oka := podReadyCondition(a)
		rb, okb := podReadyCondition(b)
		return ra != rb || oka != okb
	}
	// Anything else (the ConfigMap, rare): the old object with the new
	// resourceVersion and managed fields (strip drops them), a shallow
	// copy, against the new one.
	v := reflect.ValueOf(old)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return true
	}
	c := reflect.New(v.Type().Elem())
	c.Elem().Set(v.Elem())
	cm, ok := c.Interface().(metav1.Object)
	if !ok {
		return true
	}
	cm.SetResourceVersion(nm.GetResourceVersion())
	cm.SetManagedFields(nm.GetManagedFields())
	return !equality.Semantic.DeepEqual(c.Interface(), obj)
}

// sameMeta compares the metadata strip keeps but the resourceVersion,
// labels and annotations (each kind keeps its own).
func sameMeta(a, b *metav1.ObjectMeta) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.UID == b.UID &&
		a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.DeletionTimestamp.Equal(b.DeletionTimestamp)
}

func samePtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// tombstoned unwraps the last known state of an object deleted while the
// watch was down.
func tombstoned(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// addressedService tells whether a Service can change the render
// (cluster.Class.Addressed, by the class of the config in force):
// ClusterIP and other classes' Services without external IPs come and go
// without a render, and so does a new LoadBalancer Service until the
// allocator writes its address, which then renders at once rather than in
// the window of its creation's render (Run). Before the first sync (no
// config yet) every Service counts; a change of class is a change of the
// config, which renders with every Service.
func (s *Sidecar) addressedService(obj any) bool {
	svc, ok := tombstoned(obj).(*corev1.Service)
	m := s.model.Load()
	return !ok || m == nil || m.Class.Addressed(svc)
}

// followEarly hands a Service's new addresses that follow an anchor
// (cluster.Model.Followers: pools with announce: sidecar) to the
// follower at once (dataplane.LocalVIPs.AddEarly), ahead of the render
// the same event starts: the node holding the anchor answers for the
// address within milliseconds of the allocator writing it, as it would
// after the render, which at thousands of Services takes tens of
// milliseconds on every node; that render waits earlyYield, so that it
// does not compete with the early sync. Nothing before the first sync
// (no model yet), nothing for a Service that had the address already.
func (s *Sidecar) followEarly(old, obj any) {
	m := s.model.Load()
	svc, ok := obj.(*corev1.Service)
	if m == nil || !ok {
		return
	}
	var had []cluster.Follower
	if o, ok := old.(*corev1.Service); ok {
		had = m.Followers(o)
	}
	now := time.Now()
	for _, f := range m.Followers(svc) {
		if !slices.Contains(had, f) {
			s.node.Local.AddEarly(f.Addr, f.Anchor, now)
			s.earlyAt.Store(now.UnixNano())
		}
	}
}

// sliceRead tells whether rendering reads an EndpointSlice
// (cluster.SlicesRead), from the Service it belongs to as the cache holds
// it now.
func (s *Sidecar) sliceRead(obj any) bool {
	es, ok := tombstoned(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return true
	}
	var svc *corev1.Service
	if o, err := s.services.ByNamespace(es.Namespace).Get(es.Labels[discoveryv1.LabelServiceName]); err == nil {
		svc, _ = o.(*corev1.Service)
	}
	m := s.model.Load()
	return m == nil || m.Class.SlicesRead(cluster.SliceService(es), svc)
}

func (s *Sidecar) trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// state assembles the render state from the caches, and whether a ready
// router of each IngressController runs on this node.
func (s *Sidecar) state(m *cluster.Model) (cluster.State, map[string]bool, error) {
	var o cluster.Observed
	objs, err := s.nodes.List(labels.Everything())
	if err != nil {
		return cluster.State{}, nil, err
	}
	s.drainAsked = false
	for _, obj := range objs {
		n := obj.(*corev1.Node)
		o.Nodes = append(o.Nodes, n)
		if n.Name == s.o.NodeName {
			s.drainAsked = cluster.Drained(n)
		}
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
	for name, lister := range s.routers {
		objs, _ := lister.List(labels.Everything())
		o.Routers[name] = pods(objs)
	}
	o.Self = s.o.NodeName
	obs := m.Observe(o)
	for _, e := range obs.Skipped {
		s.log.Warn("left out", "err", e)
	}
	if len(obs.Orphans) > 0 {
		s.log.Warn("service addresses outside every pool are not served", "addresses", obs.Orphans)
	}
	s.localInterface(m.MachineNetworks, o.Nodes, obs.State.Nodes)
	return obs.State, obs.ReadyHere, nil
}

// localInterface sets this node's VRRP interface from netlink when its
// Node has no vipctl.io/interface annotation: the interface that holds the
// node's address in a machine network. Other nodes' interfaces do not
// matter to this node's config.
func (s *Sidecar) localInterface(networks []netip.Prefix, objs []*corev1.Node, nodes []cluster.Node) {
	for _, o := range objs {
		if o.Name == s.o.NodeName && o.Annotations[cluster.InterfaceAnnotation] != "" {
			return
		}
	}
	for i := range nodes {
		if nodes[i].Name != s.o.NodeName {
			continue
		}
		for _, network := range networks {
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
