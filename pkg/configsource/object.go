// Package configsource follows the ClusterVIPs object that is the live
// config (annotation vipctl.io/config-source: "true", docs/api.md,
// "Migration"), for the sidecar and the allocator, which fall back to the
// vipctl-config ConfigMap while no such object exists. It waits for the
// resource to be served (a cluster without the CRD) without holding up
// anything else, and reads the object as the ConfigMap's copy is read:
// defaulted and validated by the same code.
package configsource

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
)

// Object follows one ClusterVIPs object by name.
type Object struct {
	dyn   dynamic.Interface
	name  string
	probe time.Duration
	log   *slog.Logger
	// changed is called on every event of the object once followed.
	changed func()
	store   atomic.Pointer[cache.Store]
	wake    chan struct{}
}

// NewObject follows the object name (the cluster's) through dyn; probe
// is how often a resource not served is looked for again (30 s when
// zero); changed is called when the object changes.
func NewObject(dyn dynamic.Interface, name string, probe time.Duration, log *slog.Logger, changed func()) *Object {
	if probe <= 0 {
		probe = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	if changed == nil {
		changed = func() {}
	}
	return &Object{dyn: dyn, name: name, probe: probe, log: log, changed: changed, wake: make(chan struct{}, 1)}
}

// Wake has a resource not served looked for again now: the ConfigMap
// says the cluster migrated (AnnotationConfigSource on it, which `vipctl
// migrate` sets), so the CRD is there.
func (o *Object) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Migrated tells whether the vipctl-config ConfigMap says the cluster
// migrated to its ClusterVIPs object (`vipctl migrate` sets the
// annotation, --revert removes it): a reader still following the
// ConfigMap then looks for the object at once (Wake) rather than at its
// next probe.
func Migrated(cm *corev1.ConfigMap) bool {
	return cm.Annotations[v1alpha1.AnnotationConfigSource] == v1alpha1.SourceObject
}

// Run looks for the resource until it is served, then watches the
// object until ctx ends.
func (o *Object) Run(ctx context.Context) {
	sel := fields.OneTermEqualSelector("metadata.name", o.name).String()
	if WaitServed(ctx, o.dyn, sel, o.probe, o.wake, o.log, "following the ConfigMap") != nil {
		return
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.dyn, 0, "", func(lo *metav1.ListOptions) {
		lo.FieldSelector = sel
	})
	inf := f.ForResource(crd.Resource).Informer()
	ev := func(any) { o.changed() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: ev, UpdateFunc: func(_, n any) { ev(n) }, DeleteFunc: ev})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		o.log.Error("cannot watch the ClusterVIPs object; keeping what was read", "err", err)
	})
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	st := inf.GetStore()
	o.store.Store(&st)
	o.log.Info("following the ClusterVIPs object " + o.name + " (the live config when annotated " + v1alpha1.AnnotationConfigSource + ")")
	o.changed()
	<-ctx.Done()
}

// WaitServed returns once the ClusterVIPs objects that fieldSelector
// picks can be listed (nil), or when ctx ends (its error). While the
// resource is not installed or not readable it looks again every probe,
// and at once when wake says so; after any other error (a timeout, an
// apiserver whose etcd is electing a leader: what a node's loss brings)
// within transientRetry. It logs, once per reason, why it cannot, and
// what the caller does instead (meanwhile).
func WaitServed(ctx context.Context, dyn dynamic.Interface, fieldSelector string, probe time.Duration, wake <-chan struct{}, log *slog.Logger, meanwhile string) error {
	said := ""
	for {
		_, err := dyn.Resource(crd.Resource).List(ctx, metav1.ListOptions{FieldSelector: fieldSelector, Limit: 1})
		if err == nil {
			return nil
		}
		why, next := "cannot read ClusterVIPs objects: "+meanwhile, min(probe, transientRetry)
		switch {
		case apierrors.IsNotFound(err):
			why, next = "no ClusterVIPs resource (the CRD is not installed): "+meanwhile, probe
		case apierrors.IsForbidden(err):
			why, next = "not allowed to read ClusterVIPs objects (RBAC older than this vipctl): "+meanwhile, probe
		}
		if why != said {
			log.Info(why, "err", err, "next look", next)
			said = why
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(next):
		case <-wake:
		}
	}
}

// transientRetry is how soon WaitServed asks again after an error that
// is not the resource's absence or a refusal: the probe interval (a
// minute by default) is for what an administrator changes, and a new
// allocator leader whose first look came while etcd elected a leader
// wrote no status for that minute.
const transientRetry = time.Second

// Get is the object's config when it is the live config: ok is false
// while the object is not followed yet, is absent, or is not marked as
// the source. err is a marked object vipctl refuses (its field paths).
func (o *Object) Get() (c *v1alpha1.ClusterVIPs, ok bool, err error) {
	u, err := o.current()
	if err != nil || u == nil {
		return nil, false, err
	}
	return ReadSource(u)
}

// current is the followed object as last seen, nil while it is not
// followed or absent.
func (o *Object) current() (*unstructured.Unstructured, error) {
	st := o.store.Load()
	if st == nil {
		return nil, nil
	}
	item, exists, err := (*st).GetByKey(o.name)
	if err != nil || !exists {
		return nil, err
	}
	u, _ := item.(*unstructured.Unstructured)
	return u, nil
}

// Ref refers to the followed object as an Event's involved object
// (`oc describe clustervips` lists the Events whose reference carries its
// UID); nil while it is not followed or absent. Its Events go to the
// default namespace: the object is cluster-scoped.
func (o *Object) Ref() *corev1.ObjectReference {
	u, err := o.current()
	if err != nil || u == nil {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(),
		UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}

// ReadSource is u's config when u is the live config (annotated
// AnnotationConfigSource "true"): ok is false for nil or an object only
// reported on; err is a marked object vipctl refuses.
func ReadSource(u *unstructured.Unstructured) (c *v1alpha1.ClusterVIPs, ok bool, err error) {
	if u == nil || u.GetAnnotations()[v1alpha1.AnnotationConfigSource] != "true" {
		return nil, false, nil
	}
	c, err = Read(u)
	return c, true, err
}

// Read is the object's config as the ConfigMap's copy is read
// (v1alpha1.ParseStored: defaults, validation). The apiserver has pruned
// fields its CRD does not know; ones this vipctl does not know (a newer
// CRD) are ignored.
func Read(u *unstructured.Unstructured) (*v1alpha1.ClusterVIPs, error) {
	obj, err := crd.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.Kind, "metadata": map[string]any{"name": obj.Name}, "spec": obj.Spec}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	c, _, err := v1alpha1.ParseStored(raw)
	if err != nil {
		return nil, fmt.Errorf("clustervips %s: %w", u.GetName(), err)
	}
	return c, nil
}
