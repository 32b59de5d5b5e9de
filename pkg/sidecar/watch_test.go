package sidecar

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestWatchRendersOnlyOnRelevantEvents: at 2000 nodes, Node status posts
// (heartbeats, which strip drops) and endpoint changes of Cluster-policy
// Services arrive every second; none of them can change a render, so
// none may ask for one. What rendering reads still does.
func TestWatchRendersOnlyOnRelevantEvents(t *testing.T) {
	t.Parallel()
	lb := func(name string, policy corev1.ServiceExternalTrafficPolicy, ip string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy}}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		return s
	}
	slice := func(service, node string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: service + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.128.0.1"}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Labels: map[string]string{"pool": "a"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.21"}}}}
	clusterIP := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "backend"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	client := kubefake.NewClientset(node, clusterIP,
		lb("cluster", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.130"), slice("cluster", "worker-0"),
		lb("local", corev1.ServiceExternalTrafficPolicyLocal, "198.51.100.140"), slice("local", "worker-0"))

	s := &Sidecar{
		o:      Options{Client: client, Namespace: "openshift-vipctl"},
		static: &v1alpha1.ClusterVIPs{}, m: NewMetrics(nil), log: slog.New(slog.DiscardHandler),
		kick: make(chan struct{}, 1), routers: map[string]cache.GenericLister{},
	}
	// As after the first sync: before it, every event renders.
	s.model.Store(cluster.Compile(s.static))
	s.watch()
	ctx, cancel := context.WithCancel(context.Background())
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	defer func() {
		cancel()
		for _, f := range s.factories {
			f.Shutdown()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		t.Fatal("caches not synced")
	}
	count := func(resource, action string) float64 {
		return testutil.ToFloat64(s.m.WatchEvents.WithLabelValues(resource, action))
	}
	total := func(resource string) float64 { return count(resource, "sync") + count(resource, "ignored") }
	// waitEvents waits until resource has had n events in all.
	waitEvents := func(resource string, n float64) {
		t.Helper()
		for total(resource) < n {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitEvents("nodes", 1)
	waitEvents("services", 3)
	waitEvents("endpointslices", 2)

	core, disc := client.CoreV1(), client.DiscoveryV1()
	steps := []struct {
		name, resource, want string
		do                   func(kubernetes.Interface) error
	}{
		{"a Node's heartbeat", "nodes", "ignored", func(kubernetes.Interface) error {
			n := node.DeepCopy()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			_, err := core.Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}},
		{"the VIPs a Node publishes", "nodes", "ignored", func(kubernetes.Interface) error {
			n := node.DeepCopy()
			n.Annotations = map[string]string{v1alpha1.AnnotationNodeVIPs: `[{"address":"198.51.100.130","instance":"pool/shop/0"}]`}
			_, err := core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}},
		{"a Node's label", "nodes", "sync", func(kubernetes.Interface) error {
			n := node.DeepCopy()
			n.Labels["pool"] = "b"
			_, err := core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}},
		{"an endpoint of a Cluster-policy Service", "endpointslices", "ignored", func(kubernetes.Interface) error {
			_, err := disc.EndpointSlices("shop").Update(ctx, slice("cluster", "worker-1"), metav1.UpdateOptions{})
			return err
		}},
		{"an endpoint of a Local Service", "endpointslices", "sync", func(kubernetes.Interface) error {
			_, err := disc.EndpointSlices("shop").Update(ctx, slice("local", "worker-1"), metav1.UpdateOptions{})
			return err
		}},
		{"a ClusterIP Service", "services", "ignored", func(kubernetes.Interface) error {
			c := clusterIP.DeepCopy()
			c.Labels = map[string]string{"app": "backend"}
			_, err := core.Services("shop").Update(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"a LoadBalancer Service's label (strip keeps none)", "services", "ignored", func(kubernetes.Interface) error {
			c := lb("local", corev1.ServiceExternalTrafficPolicyLocal, "198.51.100.140")
			c.Labels = map[string]string{"app": "shop"}
			_, err := core.Services("shop").Update(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"a new LoadBalancer Service, no address yet", "services", "ignored", func(kubernetes.Interface) error {
			c := lb("new", corev1.ServiceExternalTrafficPolicyCluster, "")
			c.Status.LoadBalancer.Ingress = nil
			_, err := core.Services("shop").Create(ctx, c, metav1.CreateOptions{})
			return err
		}},
		{"its address written", "services", "sync", func(kubernetes.Interface) error {
			_, err := core.Services("shop").UpdateStatus(ctx, lb("new", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.132"), metav1.UpdateOptions{})
			return err
		}},
		{"a LoadBalancer Service's address", "services", "sync", func(kubernetes.Interface) error {
			_, err := core.Services("shop").UpdateStatus(ctx, lb("cluster", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.131"), metav1.UpdateOptions{})
			return err
		}},
		{"another class's Service and its address", "services", "ignored", func(kubernetes.Interface) error {
			c := lb("other", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.133")
			c.Spec.LoadBalancerClass = ptr.To("example.com/other")
			_, err := core.Services("shop").Create(ctx, c, metav1.CreateOptions{})
			return err
		}},
		{"its address, once the config serves that class", "services", "sync", func(kubernetes.Interface) error {
			s.model.Store(&cluster.Model{Config: s.static, Class: cluster.Class{Name: "example.com/other", Only: true}})
			c := lb("other", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.134")
			c.Spec.LoadBalancerClass = ptr.To("example.com/other")
			_, err := core.Services("shop").UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"a Service without a class, the config serving one class only", "services", "ignored", func(kubernetes.Interface) error {
			_, err := core.Services("shop").UpdateStatus(ctx, lb("cluster", corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.135"), metav1.UpdateOptions{})
			return err
		}},
	}
	for _, st := range steps {
		before := count(st.resource, st.want)
		n := total(st.resource)
		if err := st.do(client); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		waitEvents(st.resource, n+1)
		if count(st.resource, st.want) != before+1 {
			t.Errorf("%s: not counted as %s (sync %v, ignored %v)", st.name, st.want, count(st.resource, "sync"), count(st.resource, "ignored"))
		}
	}
}
