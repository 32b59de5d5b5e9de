package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

const allocPools = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26, "2001:db8:100::100-2001:db8:100::1ff"]
    - name: small
      addresses: [198.51.100.200-198.51.100.203]
      instances: 1
      autoAssign: false
`

// allocEnv is a real apiserver with the rendered manifests applied and a
// token for the allocator's ServiceAccount.
type allocEnv struct {
	api   *testapiserver.Server
	admin kubernetes.Interface
	token string
}

func startAllocEnv(t testing.TB, clusterYAML string) *allocEnv {
	t.Helper()
	api := testapiserver.Start(t)
	adminCfg := api.AdminConfig()
	adminCfg.QPS, adminCfg.Burst = 500, 1000 // tests create Services in bulk
	admin := kubernetes.NewForConfigOrDie(adminCfg)
	ctx := context.Background()
	// The node readers' Role lives in the router namespace, which a real
	// cluster has.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultRouterNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := v1alpha1.Parse([]byte(clusterYAML))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Objects(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lab.ApplyObjects(t, api.AdminConfig(), objs)
	return allocatorFor(t, api, admin)
}

// allocatorFor gets a token for the allocator's ServiceAccount, whose
// manifests are applied already.
func allocatorFor(t testing.TB, api *testapiserver.Server, admin kubernetes.Interface) *allocEnv {
	t.Helper()
	return &allocEnv{api: api, admin: admin, token: lab.AllocatorToken(t, admin)}
}

type svcOpt func(*corev1.Service)

func (e *allocEnv) service(t testing.TB, ns, name string, opts ...svcOpt) *corev1.Service {
	t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, o := range opts {
		o(s)
	}
	out, err := e.admin.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitIPs waits until the Service's status holds n addresses.
func (e *allocEnv) waitIPs(t testing.TB, ns, name string, n int) []string {
	t.Helper()
	return waitServiceIPs(t, e.admin, ns, name, n)
}

// waitServiceIPs waits until the Service's status holds n addresses and
// returns them.
func waitServiceIPs(t testing.TB, c kubernetes.Interface, ns, name string, n int) []string {
	t.Helper()
	var ips []string
	lab.WaitFor(t, 30*time.Second, fmt.Sprintf("%s/%s gets %d address(es)", ns, name, n), func() bool {
		s, err := c.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		ips = nil
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		return len(ips) == n
	})
	return ips
}

// waitEvent waits for an Event on the object whose reason is reason and
// whose message contains msg.
func (e *allocEnv) waitEvent(t testing.TB, ns, name, reason, msg string) {
	t.Helper()
	var last []string
	lab.WaitFor(t, 30*time.Second, fmt.Sprintf("event %s %q on %s/%s (have %v)", reason, msg, ns, name, last), func() bool {
		evs, err := e.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false
		}
		last = nil
		for _, ev := range evs.Items {
			last = append(last, ev.Reason+": "+ev.Message)
			if ev.Reason == reason && strings.Contains(ev.Message, msg) {
				return true
			}
		}
		return false
	})
}

func annotate(k, v string) svcOpt { return func(s *corev1.Service) { s.Annotations[k] = v } }

// TestAllocatorServesServices: the allocator, with only its ServiceAccount's
// rendered permissions, serves the Service API users expect.
func TestAllocatorServesServices(t *testing.T) {
	e := startAllocEnv(t, clusterYAML("fast", "unicast", allocPools))
	lab.StartAllocator(t, e.api, e.token, "a-0")
	ctx := context.Background()

	e.service(t, "default", "first")
	if got := e.waitIPs(t, "default", "first", 1); got[0] != "198.51.100.128" {
		t.Errorf("first Service got %v, want the pool's first address", got)
	}
	e.waitEvent(t, "default", "first", "IPAllocated", "198.51.100.128 from pool web")

	e.service(t, "default", "pinned", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.51.100.150" })
	if got := e.waitIPs(t, "default", "pinned", 1); got[0] != "198.51.100.150" {
		t.Errorf("spec.loadBalancerIP: got %v", got)
	}
	e.service(t, "default", "manual", annotate(v1alpha1.AnnotationLoadBalancerIPs, "198.51.100.201"))
	if got := e.waitIPs(t, "default", "manual", 1); got[0] != "198.51.100.201" {
		t.Errorf("annotation from an autoAssign=false pool: got %v", got)
	}
	e.service(t, "default", "outside", annotate(v1alpha1.AnnotationLoadBalancerIPs, "198.51.100.77"))
	e.waitEvent(t, "default", "outside", "AllocationFailed", "198.51.100.77 is outside every pool")
	e.service(t, "default", "taken", annotate(v1alpha1.AnnotationLoadBalancerIPs, "198.51.100.150"))
	e.waitEvent(t, "default", "taken", "AllocationFailed", "198.51.100.150 is in use by default/pinned")
	e.service(t, "default", "anchor", annotate(v1alpha1.AnnotationLoadBalancerIPs, "198.51.100.191"))
	e.waitEvent(t, "default", "anchor", "AllocationFailed", "anchors a VRRP instance")
	e.service(t, "default", "nopool", annotate(v1alpha1.AnnotationPool, "nope"))
	e.waitEvent(t, "default", "nopool", "AllocationFailed", `pool "nope" does not exist`)

	e.service(t, "default", "dual", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	})
	dual := e.waitIPs(t, "default", "dual", 2)
	if !netip.MustParseAddr(dual[0]).Is4() || !netip.MustParseAddr(dual[1]).Is6() {
		t.Errorf("PreferDualStack got %v, want one IPv4 and one IPv6 address", dual)
	}

	shared := func(port int32) svcOpt {
		return func(s *corev1.Service) {
			s.Annotations[v1alpha1.AnnotationAllowSharedIP] = "team-a"
			s.Annotations[v1alpha1.AnnotationPool] = "web"
			s.Spec.Ports = []corev1.ServicePort{{Port: port}}
		}
	}
	e.service(t, "default", "share-80", shared(80))
	a := e.waitIPs(t, "default", "share-80", 1)
	e.service(t, "default", "share-443", shared(443))
	if b := e.waitIPs(t, "default", "share-443", 1); b[0] != a[0] {
		t.Errorf("sharing key, distinct ports: %v and %v, want one address", a, b)
	}
	e.service(t, "default", "share-80-again", shared(80))
	if c := e.waitIPs(t, "default", "share-80-again", 1); c[0] == a[0] {
		t.Errorf("sharing key with a clashing port got the shared address %v", c)
	}

	// Another class is left alone.
	e.service(t, "default", "foreign", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })

	// Type change releases, and the released address is reused.
	s, err := e.admin.CoreV1().Services("default").Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := e.admin.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIPs(t, "default", "first", 0)
	e.service(t, "default", "reuse")
	if got := e.waitIPs(t, "default", "reuse", 1); got[0] != "198.51.100.128" {
		t.Errorf("after a type change the address was not released: the next Service got %v", got)
	}
	if got := e.waitIPs(t, "default", "foreign", 0); len(got) != 0 {
		t.Errorf("a Service of another class got %v", got)
	}
	assertNoDuplicates(t, e.admin)
}

// TestAllocatorManyServicesAndLeaderLoss: 500 Services get distinct
// addresses; the leader stops mid-way, the standby takes the Lease and
// carries on; no address is ever in two statuses.
func TestAllocatorManyServicesAndLeaderLoss(t *testing.T) {
	// IPv6 Services: the test apiserver's IPv4 service CIDR has room for
	// 62 ClusterIPs only.
	pools := allocPools + "    - name: big\n      addresses: [\"2001:db8:100::1:0/112\"]\n"
	yaml := clusterYAML("fast", "unicast", pools)
	e := startAllocEnv(t, yaml)
	first := lab.StartAllocator(t, e.api, e.token, "a-0")
	lab.WaitFor(t, 20*time.Second, "a-0 leads", first.Leading)
	second := lab.StartAllocator(t, e.api, e.token, "a-1")

	stop := make(chan struct{})
	checked := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				checked <- n
				return
			default:
			}
			assertNoDuplicates(t, e.admin)
			n++
			time.Sleep(200 * time.Millisecond)
		}
	}()
	create := func(from, to int) {
		parallel500(t, from, to, func(i int) error {
			_, err := e.admin.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Namespace: "default"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}},
					IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}},
			}, metav1.CreateOptions{})
			return err
		})
	}
	create(0, 250)
	first.Stop() // the Lease is released on the way out
	lab.WaitFor(t, 20*time.Second, "a-1 takes over", second.Leading)
	create(250, 500)
	lab.WaitFor(t, 120*time.Second, "500 Services allocated", func() bool { return countAllocated(t, e.admin) == 500 })
	close(stop)
	if n := <-checked; n < 3 {
		t.Errorf("duplicates checked only %d times", n)
	}
	assertNoDuplicates(t, e.admin)
}

// TestAllocatorSurvivesRestartBadConfigAndMissingPermission: an apiserver
// restart, a broken ConfigMap (the last valid pools stay) and a missing
// permission (named in the log, the process stays up and recovers).
func TestAllocatorSurvivesRestartBadConfigAndMissingPermission(t *testing.T) {
	e := startAllocEnv(t, clusterYAML("fast", "unicast", allocPools))
	r := lab.StartAllocator(t, e.api, e.token, "a-0")
	ctx := context.Background()
	e.service(t, "default", "before")
	e.waitIPs(t, "default", "before", 1)

	e.api.RestartAPIServer(t, nil)
	e.service(t, "default", "after-restart")
	e.waitIPs(t, "default", "after-restart", 1)

	cm, err := e.admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[v1alpha1.ConfigMapKey] = strings.Replace(clusterYAML("fast", "unicast", allocPools), "[198.51.100.128/26,", "[bogus,", 1)
	if _, err := e.admin.CoreV1().ConfigMaps(onnode.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(t, onnode.Namespace, v1alpha1.ConfigMapName, "InvalidConfig", "bogus")
	e.service(t, "default", "during-bad-config")
	if got := e.waitIPs(t, "default", "during-bad-config", 1); !strings.HasPrefix(got[0], "198.51.100.") {
		t.Errorf("with a broken ConfigMap: %v, want an address of the last valid pools", got)
	}

	// Without services/status the allocator says so and keeps running.
	if err := e.admin.RbacV1().ClusterRoleBindings().Delete(ctx, manifests.AllocatorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its cache may still be warm: a new Service must fail to be written.
	e.service(t, "default", "no-permission")
	lab.WaitFor(t, 30*time.Second, "a log naming the missing permission", func() bool {
		l := r.Log.String()
		return strings.Contains(l, "permission missing") && (strings.Contains(l, `cannot update resource \"services/status\"`) || strings.Contains(l, `cannot list resource \"services\"`))
	})
	select {
	case <-r.Done():
		t.Fatal("the allocator exited on a missing permission")
	default:
	}
	lab.ApplyObjects(t, e.api.AdminConfig(), manifests.Allocator(mustParse(t, clusterYAML("fast", "unicast", allocPools))))
	e.waitIPs(t, "default", "no-permission", 1)

	// Nothing broader than its verbs.
	as := kubernetes.NewForConfigOrDie(e.api.TokenConfig(e.token))
	if _, err := as.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("allocator listed secrets: %v", err)
	}
	// It reads the Nodes (the ClusterVIPs status: their annotations),
	// never writes one.
	if _, err := as.CoreV1().Nodes().Patch(ctx, "master-0", types.MergePatchType, []byte(`{"metadata":{"annotations":{"vipctl.io/vips":"[]"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("allocator patched a Node: %v", err)
	}
	if err := as.CoreV1().Services("default").Delete(ctx, "before", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("allocator deleted a Service: %v", err)
	}
	if _, err := as.CoreV1().ConfigMaps(onnode.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("allocator wrote its ConfigMap: %v", err)
	}
	assertNoDuplicates(t, e.admin)
}

func mustParse(t testing.TB, y string) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parallel500(t testing.TB, from, to int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	sem := make(chan struct{}, 8)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func countAllocated(t testing.TB, c kubernetes.Interface) int {
	t.Helper()
	list, err := c.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range list.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			n++
		}
	}
	return n
}

// assertNoDuplicates fails when one address is in the status of two
// Services that do not share it on purpose.
func assertNoDuplicates(t testing.TB, c kubernetes.Interface) {
	t.Helper()
	list, err := c.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	by := map[string][]string{}
	for _, s := range list.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			key := s.Annotations[v1alpha1.AnnotationAllowSharedIP]
			by[in.IP] = append(by[in.IP], key+"|"+s.Namespace+"/"+s.Name)
		}
	}
	for ip, users := range by {
		if len(users) < 2 {
			continue
		}
		var b bytes.Buffer
		for _, u := range users {
			k, _, _ := strings.Cut(u, "|")
			if k == "" || k != strings.SplitN(users[0], "|", 2)[0] {
				fmt.Fprintf(&b, "%s ", u)
			}
		}
		if b.Len() > 0 {
			t.Errorf("%s is in the status of %v", ip, users)
		}
	}
}

func (e *allocEnv) deleteService(t testing.TB, ns, name string) {
	t.Helper()
	if err := e.admin.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
