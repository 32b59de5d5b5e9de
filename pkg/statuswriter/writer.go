package statuswriter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/status"
)

// Options configure a Writer.
type Options struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Services lists the cluster's Services (the allocator's cache).
	Services corelisters.ServiceLister
	Log      *slog.Logger
	// Debounce is how long a change of a Node or of an object waits for
	// the ones right after it before the status is computed (a holder's
	// move is published by two nodes). Zero: 100ms.
	Debounce time.Duration
	// ServiceDelay is how long a change of a Service (Kick) may wait:
	// it moves only pool counts, and a burst of allocations would
	// otherwise have the whole status computed ten times a second. Zero:
	// 1s.
	ServiceDelay time.Duration
	// Probe is how often the writer looks again for a resource that is
	// not served (the CRD not installed) or not allowed. Zero: 30s.
	Probe time.Duration
	// Observe, when set, gets every object's conditions (by object
	// name) each time the statuses are computed, written or not: the
	// allocator exports them as metrics for the dashboard.
	Observe func(map[string][]metav1.Condition)
	// ObserveNodes, when set, gets the Nodes' own addresses each time
	// the statuses are computed: the allocator gives none of them out.
	ObserveNodes func([]v1alpha1.NodeAddresses)
}

// Writer writes the status of every ClusterVIPs object.
type Writer struct {
	o Options
	// kick is a Service's change (Kick), changed a Node's or an
	// object's.
	kick, changed chan struct{}
	// wake has a resource not served looked for again (Wake).
	wake chan struct{}
}

// New makes a Writer; Run starts it.
func New(o Options) *Writer {
	if o.Debounce <= 0 {
		o.Debounce = 100 * time.Millisecond
	}
	if o.ServiceDelay <= 0 {
		o.ServiceDelay = time.Second
	}
	if o.Probe <= 0 {
		o.Probe = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Writer{o: o, kick: make(chan struct{}, 1), changed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}

// Wake has the writer look for the resource now while it is not served
// (the ConfigMap changed: `vipctl migrate` marks it when it installs the
// CRD).
func (w *Writer) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Kick has the status computed again within ServiceDelay (a Service
// changed).
func (w *Writer) Kick() { signal(w.kick) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run writes status until ctx ends. Without the CustomResourceDefinition
// (a cluster that has not installed it) or the right to read it (an
// allocator with an older ClusterRole), it looks again every Probe and
// writes nothing meanwhile.
func (w *Writer) Run(ctx context.Context) error {
	if err := configsource.WaitServed(ctx, w.o.Dynamic, "", w.o.Probe, w.wake, w.o.Log, "no status written (docs/api.md)"); err != nil {
		return err
	}
	nodeF := informers.NewSharedInformerFactoryWithOptions(w.o.Client, 0, informers.WithTransform(stripNode))
	nodes := nodeF.Core().V1().Nodes()
	objF := dynamicinformer.NewDynamicSharedInformerFactory(w.o.Dynamic, 0)
	objs := objF.ForResource(crd.Resource)
	kick := func(any) { signal(w.changed) }
	handler := cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick}
	_, _ = nodes.Informer().AddEventHandler(handler)
	_, _ = objs.Informer().AddEventHandler(handler)
	// The kubelets' Leases tell an isolated holder from a split brain.
	// Not waited for and no event of theirs kicks (2000 nodes renew 200
	// times a second): read at each write; an allocator not allowed to
	// read them (an older ClusterRole) tells only split brains.
	leaseF := informers.NewSharedInformerFactoryWithOptions(w.o.Client, 0, informers.WithNamespace(status.NodeLeaseNamespace),
		informers.WithTransform(stripLease))
	leases := leaseF.Coordination().V1().Leases()
	_ = leases.Informer().SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.o.Log.Debug("cannot watch the kubelets' Leases", "err", err)
	})
	nodeF.Start(ctx.Done())
	objF.Start(ctx.Done())
	leaseF.Start(ctx.Done())
	defer nodeF.Shutdown()
	defer objF.Shutdown()
	defer leaseF.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced, objs.Informer().HasSynced) {
		return ctx.Err()
	}
	// The Leases a little, not for ever (an allocator not allowed to
	// list them never syncs them): a new leader's first status, right
	// after the old leader's node was lost, would otherwise know no
	// Lease and call the lost node's old claims a split brain.
	lctx, cancel := context.WithTimeout(ctx, leaseSyncWait)
	cache.WaitForCacheSync(lctx.Done(), leases.Informer().HasSynced)
	cancel()
	w.o.Log.Info("writing ClusterVIPs status")
	// due is when the status is computed next; zero: nothing pending.
	// A change brings it forward, never back.
	var due time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	schedule := func(in time.Duration) {
		if at := time.Now().Add(in); due.IsZero() || at.Before(due) {
			due = at
			timer.Reset(in)
		}
	}
	due = time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
			// Changes come in bursts (a failover moves every VIP of
			// a node, each node publishing on its own): one write
			// for all of them.
			schedule(w.o.Debounce)
			continue
		case <-w.kick:
			schedule(w.o.ServiceDelay)
			continue
		case <-timer.C:
		}
		due = time.Time{}
		split, err := w.writeAll(ctx, nodes.Lister(), objs.Lister(), leases.Lister())
		switch {
		case err != nil && ctx.Err() == nil:
			w.o.Log.Error("cannot write ClusterVIPs status", "err", err)
			schedule(time.Second)
		case split:
			// A split brain may be a holder cut off whose Lease is
			// not overdue yet, and a holder taken for lost (isolated)
			// one that renews its Lease again, a split brain: Lease
			// renewals prompt nothing, so look again.
			schedule(splitRecheck)
		}
	}
}

// leaseSyncWait bounds the wait for the kubelets' Leases at the start.
const leaseSyncWait = 3 * time.Second

// splitRecheck is how soon a status with a split brain or an isolated
// holder is computed again, nothing else prompting it.
const splitRecheck = 5 * time.Second

// writeAll writes every object's status; split tells whether one has a
// split brain or an isolated holder.
func (w *Writer) writeAll(ctx context.Context, nodeLister corelisters.NodeLister, objs cache.GenericLister, leaseLister coordinationlisters.LeaseLister) (split bool, err error) {
	nodePtrs, err := nodeLister.List(labels.Everything())
	if err != nil {
		return false, err
	}
	svcPtrs, err := w.o.Services.List(labels.Everything())
	if err != nil {
		return false, err
	}
	leasePtrs, _ := leaseLister.List(labels.Everything())
	reach := status.ReachFromLeases(status.Deref(leasePtrs))
	nodes, svcs := status.Deref(nodePtrs), status.Deref(svcPtrs)
	if w.o.ObserveNodes != nil {
		w.o.ObserveNodes(nodeAddresses(nodes))
	}
	list, err := objs.List(labels.Everything())
	if err != nil {
		return false, err
	}
	var errs []error
	conditions := map[string][]metav1.Condition{}
	for _, o := range list {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		st, s, err := w.write(ctx, u, nodes, svcs, reach)
		split = split || s
		errs = append(errs, err)
		if st != nil {
			conditions[u.GetName()] = st.Conditions
		}
	}
	if w.o.Observe != nil {
		w.o.Observe(conditions)
	}
	return split, errors.Join(errs...)
}

// write updates one object's status when it changed, and returns it;
// split tells whether it has a split brain or an isolated holder.
func (w *Writer) write(ctx context.Context, u *unstructured.Unstructured, nodes []corev1.Node, svcs []corev1.Service, reach status.Reach) (_ *crd.ClusterVIPsStatus, split bool, err error) {
	obj, err := crd.FromUnstructured(u)
	if err != nil {
		return nil, false, err
	}
	st := Build(obj.Name, obj.Generation, obj.Spec, obj.Status, nodes, svcs, reach, time.Now())
	split = slices.ContainsFunc(st.VIPs, func(v crd.VIPStatus) bool {
		return v.State == status.StateSplitBrain || v.State == status.StateIsolated
	})
	before, err := json.Marshal(obj.Status)
	if err != nil {
		return &st, split, err
	}
	after, err := json.Marshal(st)
	if err != nil {
		return &st, split, err
	}
	if bytes.Equal(before, after) {
		return &st, split, nil
	}
	var m map[string]any
	if err := json.Unmarshal(after, &m); err != nil {
		return &st, split, err
	}
	cp := u.DeepCopy()
	cp.Object["status"] = m
	if _, err := w.o.Dynamic.Resource(crd.Resource).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The informer brings the newer object (or its deletion)
			// and, with it, another pass.
			return &st, split, nil
		}
		return &st, split, err
	}
	w.o.Log.Debug("ClusterVIPs status written", "name", obj.Name, "generation", obj.Generation)
	return &st, split, nil
}

// stripLease keeps what status.ReachFromLeases reads.
func stripLease(obj any) (any, error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return obj, nil
	}
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace, ResourceVersion: l.ResourceVersion},
		Spec: coordinationv1.LeaseSpec{RenewTime: l.Spec.RenewTime, LeaseDurationSeconds: l.Spec.LeaseDurationSeconds}}, nil
}

// stripNode keeps what Build reads of a Node: its name, vipctl's
// annotations, its control-plane role labels and its InternalIP and
// ExternalIP addresses (a VIP or pool address that is a node's own).
func stripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	keep := map[string]string{}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "vipctl.io/") {
			keep[k] = v
		}
	}
	var roles map[string]string
	if cluster.IsControlPlane(n.Labels) {
		roles = map[string]string{cluster.RoleLabel("control-plane"): ""}
	}
	var addrs []corev1.NodeAddress
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			addrs = append(addrs, a)
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, Annotations: keep, Labels: roles},
		Status: corev1.NodeStatus{Addresses: addrs}}, nil
}
