package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/sidecar"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// LogBuffer collects a component's log for assertions, written and read
// from different goroutines.
type LogBuffer = fixture.LogBuffer

// Sidecar is one node's running runtimecfg sidecar, in process but with
// the node's own credentials, its namespace's addresses and its daemons.
type Sidecar struct {
	*sidecar.Sidecar
	Metrics *sidecar.Metrics
	// Registry holds Metrics, for a test that serves them to a scraper.
	Registry *prometheus.Registry
	Log      *LogBuffer
	cancel   context.CancelFunc
	done     chan struct{}
}

// Stop ends the sidecar and waits for it. The sidecar cleans nothing up
// on its way out (addresses, routes and tables stay as they are), so this
// is also what a crash of its container does to the node; StartSidecar
// again is the container's restart (the pod's init container does not
// run again).
func (sc *Sidecar) Stop() {
	sc.cancel()
	<-sc.done
}

// KubeCluster couples a lab cluster with a real kube-apiserver in which
// every lab node can exist as a Node (AddNode).
type KubeCluster struct {
	*Cluster
	API   *testapiserver.Server
	Admin kubernetes.Interface
	// ConfigPath holds the cluster's config file, as `vipctl render` and
	// the sidecars read it.
	ConfigPath string
	Sidecars   map[string]*Sidecar
	// WireInterval is the sidecars' rest between two passes of questions
	// on the wire (sidecar.Options.WireInterval; zero: its default).
	WireInterval time.Duration
	// ClashProposeAfter is how long the sidecars hear a foreign router on
	// one of the cluster's VRRP IDs before they propose another
	// (sidecar.Options.ClashProposeAfter; zero: its default).
	ClashProposeAfter time.Duration
}

// StartKube starts a kube-apiserver and a lab cluster (Start), with the
// namespaces vipctl and the routers live in.
func StartKube(t testing.TB, clusterYAML string, specs []NodeSpec) *KubeCluster {
	t.Helper()
	api := testapiserver.Start(t)
	lc := Start(t, clusterYAML, specs)
	kc := &KubeCluster{Cluster: lc, API: api, Admin: kubernetes.NewForConfigOrDie(api.AdminConfig()), Sidecars: map[string]*Sidecar{}}
	kc.ConfigPath = filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(kc.ConfigPath, []byte(clusterYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{onnode.Namespace, v1alpha1.DefaultRouterNamespace} {
		if _, err := kc.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// No controller-manager runs: create the ServiceAccount pods need.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if _, err := kc.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return kc
}

// Deploy applies everything `vipctl render` writes to DIR/manifests/ and
// runs the allocator with its ServiceAccount's token.
func (kc *KubeCluster) Deploy(t testing.TB) {
	t.Helper()
	kc.ApplyManifests(t)
	StartAllocator(t, kc.API, AllocatorToken(t, kc.Admin), "allocator-0")
}

// ApplyManifests applies everything `vipctl render` writes to
// DIR/manifests/ (the ConfigMap, RBAC, the allocator's objects) and runs
// no allocator: for tests that write the Services' addresses themselves
// (SetLBStatus).
func (kc *KubeCluster) ApplyManifests(t testing.TB) {
	t.Helper()
	objs, err := manifests.Objects(kc.Config)
	if err != nil {
		t.Fatal(err)
	}
	ApplyObjects(t, kc.API.AdminConfig(), objs)
}

// GrantNodeReaders applies the rendered node RBAC, as an administrator
// would with `oc apply -f out/manifests/`.
func (kc *KubeCluster) GrantNodeReaders(t testing.TB) {
	t.Helper()
	ApplyObjects(t, kc.API.AdminConfig(), manifests.NodeReaders(kc.Config))
}

// ApplyObjects creates typed objects (TypeMeta set, as pkg/manifests
// builds them) as `oc apply` would, through the dynamic client.
func ApplyObjects(t testing.TB, cfg *rest.Config, objs []runtime.Object) {
	t.Helper()
	ApplyObjectsWithin(t, cfg, objs, 0)
}

// ApplyObjectsWithin is ApplyObjects retrying each object for up to
// timeout, for an API whose servers come and go (the cluster lab's, at
// its start): as `oc apply` run again until it succeeds.
func ApplyObjectsWithin(t testing.TB, cfg *rest.Config, objs []runtime.Object, timeout time.Duration) {
	t.Helper()
	dyn, mapper := dynamicClient(cfg)
	deadline := time.Now().Add(timeout)
	for _, o := range objs {
		for {
			err := applyObject(dyn, mapper, o)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			mapper.Reset()
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// CreateAsBootstrap creates objs as the OpenShift installer's bootstrap
// creates its manifests directory (cluster-bootstrap, through
// library-go's assets/create.EnsureManifestsCreated): every object not
// created yet, in one pass, again every 200 ms with the apiserver's
// discovery read anew, until all are created or timeout passes. A
// custom resource whose CRD comes later in the list is created once
// the CRD is served. It returns how many passes it took.
func CreateAsBootstrap(t testing.TB, cfg *rest.Config, objs []runtime.Object, timeout time.Duration) int {
	t.Helper()
	dyn, mapper := dynamicClient(cfg)
	left := slices.Clone(objs)
	deadline := time.Now().Add(timeout)
	for pass := 1; ; pass++ {
		var errs []error
		left = slices.DeleteFunc(left, func(o runtime.Object) bool {
			err := applyObject(dyn, mapper, o)
			errs = append(errs, err)
			return err == nil
		})
		if len(left) == 0 {
			return pass
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d objects not created after %s: %v", len(left), timeout, errors.Join(errs...))
		}
		mapper.Reset()
		time.Sleep(200 * time.Millisecond)
	}
}

func applyObject(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, o runtime.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	ri, err := resourceFor(dyn, mapper, obj)
	if err != nil {
		return err
	}
	if _, err := ri.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// Resources returns what finds the dynamic client of an object's kind
// (namespaced to the object's namespace where the kind is), through the
// apiserver's discovery: CRDs installed since count too.
func Resources(cfg *rest.Config) func(t testing.TB, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	dyn, mapper := dynamicClient(cfg)
	return func(t testing.TB, obj *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		ri, err := resourceFor(dyn, mapper, obj)
		if err != nil {
			t.Fatal(err)
		}
		return ri
	}
}

func dynamicClient(cfg *rest.Config) (dynamic.Interface, meta.ResettableRESTMapper) {
	return dynamic.NewForConfigOrDie(cfg), restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
}

func resourceFor(dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

// AddNode creates the Node object of a lab node.
func (kc *KubeCluster) AddNode(t testing.TB, name string) {
	t.Helper()
	var spec cluster.Node
	for _, n := range kc.State.Nodes {
		if n.Name == name {
			spec = n
		}
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if spec.ControlPlane {
		labels["node-role.kubernetes.io/control-plane"] = ""
	} else {
		labels["node-role.kubernetes.io/worker"] = ""
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, a := range spec.Addresses {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	ctx := context.Background()
	if _, err := kc.Admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Addresses live in status, which create ignores. A running sidecar may
	// annotate the Node in between (a kubelet registering late), so the
	// status write retries on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := kc.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Addresses = node.Status.Addresses
		_, err = kc.Admin.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// StartSidecar runs the node's sidecar with the node's own client
// certificate (system:node:<name>, group system:nodes). It takes over
// keeping the node's VIPs local from the lab.
func (kc *KubeCluster) StartSidecar(t testing.TB, name string) *Sidecar {
	t.Helper()
	n := kc.ByName[name]
	n.stopLocal() // the sidecar keeps the VIPs local from now on
	h, err := netns.GetFromName(n.Host.NS)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close(); _ = h.Close() })
	buf := &LogBuffer{}
	reg := prometheus.NewRegistry()
	m := sidecar.NewMetrics(reg)
	s, err := sidecar.New(sidecar.Options{
		OnceOptions: kc.onceOptions(name),
		Client:      kubernetes.NewForConfigOrDie(kc.API.NodeConfig(t, name)),
		Dynamic:     dynamic.NewForConfigOrDie(kc.API.NodeConfig(t, name)),
		ObjectProbe: 2 * time.Second,
		Debounce:    100 * time.Millisecond,
		// The API's reach every second, not every 30: the alert tests
		// cut their waits.
		APIProbeInterval:  time.Second,
		WireInterval:      kc.WireInterval,
		ClashProposeAfter: kc.ClashProposeAfter,
		Addresses:         func() ([]netip.Addr, error) { return dataplane.HandleAddresses(nl) },
		Interface:         func(n netip.Prefix) (string, error) { return dataplane.LocalInterface(nl, n) },
		Log:               slog.New(slog.NewTextHandler(buf, nil)),
		Metrics:           m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &Sidecar{Sidecar: s, Metrics: m, Registry: reg, Log: buf, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("sidecar %s: %v", name, err)
		}
	}()
	kc.Sidecars[name] = sc
	t.Cleanup(func() {
		sc.Stop()
		if t.Failed() {
			t.Logf("--- sidecar %s log:\n%s", name, buf.Tail(30))
		}
	})
	return sc
}

// RestartSidecar starts the node's sidecar as its container does after a
// crash, running the container's command (internal/cli's runSidecar):
// runtimecfg.Once from the files on disk, leaving the node's drain and
// its synced mark as they are, then the sidecar. The pod's init
// container does not run again.
func (kc *KubeCluster) RestartSidecar(t testing.TB, name string) *Sidecar {
	t.Helper()
	o := kc.onceOptions(name)
	o.KeepDrain = true
	if _, err := runtimecfg.Once(context.Background(), o); err != nil && !errors.Is(err, runtimecfg.ErrNoInstances) {
		t.Fatalf("%s: the sidecar's runtimecfg --once: %v", name, err)
	}
	return kc.StartSidecar(t, name)
}

// onceOptions are the node's runtimecfg flags, as the static pods pass
// them (the lab has no bootstrap node list: nodes render from the API and
// then their last-good view).
func (kc *KubeCluster) onceOptions(name string) runtimecfg.OnceOptions {
	n := kc.ByName[name]
	return runtimecfg.OnceOptions{Target: n.Target, Config: kc.ConfigPath, NodeName: name, BootstrapNodes: n.Target.Path(onnode.BootstrapNodesPath)}
}

// KeepalivedConf is the node's keepalived.conf as it is now.
func (kc *KubeCluster) KeepalivedConf(t testing.TB, node string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kc.ByName[node].Target.Root, onnode.KeepalivedConfPath))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// WaitConf waits until cond holds for node's keepalived.conf.
func (kc *KubeCluster) WaitConf(t testing.TB, node, what string, cond func(string) bool) {
	t.Helper()
	var last string
	ok := WaitUntil(30*time.Second, func() bool { last = kc.KeepalivedConf(t, node); return cond(last) })
	if !ok {
		t.Fatalf("%s: keepalived.conf never showed %s; last:\n%s", node, what, last)
	}
}

// SetPodReady sets a router pod's readiness as the kubelet would.
func (kc *KubeCluster) SetPodReady(t testing.TB, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := kc.Admin.CoreV1().Pods(v1alpha1.DefaultRouterNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = readyConditions(ready)
	if _, err := kc.Admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// CreateRouterPod creates a router pod of the default IngressController
// bound to node, and sets its readiness as the kubelet would.
func (kc *KubeCluster) CreateRouterPod(t testing.TB, node string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "router-default-" + node, Namespace: v1alpha1.DefaultRouterNamespace,
			Labels: map[string]string{v1alpha1.RouterDeploymentLabel: "default"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "router", Image: "router"}}},
	}
	created, err := kc.Admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.Conditions = readyConditions(ready)
	if _, err := kc.Admin.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// CreateLBService creates a LoadBalancer Service in the default namespace
// asking for ip (if set) through the vipctl.io/load-balancer-ips
// annotation.
func (kc *KubeCluster) CreateLBService(t testing.TB, name, ip string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080}}},
	}
	if ip != "" {
		svc.Annotations[v1alpha1.AnnotationLoadBalancerIPs] = ip
	}
	created, err := kc.Admin.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// SetLBStatus writes addresses into a Service's status as the allocator
// would, for tests that run no allocator.
func (kc *KubeCluster) SetLBStatus(t testing.TB, name string, ips ...string) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	svc, err := kc.Admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	out, err := kc.Admin.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(fmt.Errorf("service %s status: %w", name, err))
	}
	return out
}

// readyConditions are a pod's conditions as the kubelet reports them when
// the pod is ready or not.
func readyConditions(ready bool) []corev1.PodCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
}
