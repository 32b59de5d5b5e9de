package runtimecfg

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
)

func svc(name string, created int, class *string, policy corev1.ServiceExternalTrafficPolicy, ips ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, ExternalTrafficPolicy: policy},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestServiceVIPs(t *testing.T) {
	c, _ := loadExample(t)
	ours, other := v1alpha1.LoadBalancerClass, "example.com/other"
	clusterIP := svc("cip", 1, nil, "", "198.51.100.140")
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	services := []*corev1.Service{
		svc("b", 2, nil, "", "198.51.100.131"),
		svc("a", 1, &ours, "", "198.51.100.130", "198.51.100.130"),
		svc("shared", 3, nil, "", "198.51.100.131"),
		svc("foreign", 1, &other, "", "198.51.100.150"),
		clusterIP,
		svc("outside", 1, nil, "", "203.0.113.7"),
		svc("bad", 1, nil, "", "not-an-ip"),
	}
	byPool, orphans := ServiceVIPs(c, services)
	if got, want := byPool["general"], addrs("198.51.100.130", "198.51.100.131"); !slices.Equal(got, want) {
		t.Errorf("pool general = %v, want %v (sorted, shared address once, other classes and types ignored)", got, want)
	}
	if want := addrs("203.0.113.7"); !slices.Equal(orphans, want) {
		t.Errorf("orphans = %v, want %v", orphans, want)
	}
}

func TestLocalServices(t *testing.T) {
	c, _ := loadExample(t)
	local := corev1.ServiceExternalTrafficPolicyLocal
	services := []*corev1.Service{
		svc("newer", 5, nil, local, "198.51.100.141"),
		svc("older", 2, nil, local, "198.51.100.140"),
		svc("cluster", 1, nil, corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.130"),
		svc("pending", 1, nil, local),
	}
	yes, no := true, false
	n1, n2, n3 := "node-1", "node-2", "node-3"
	slices := map[string][]*discoveryv1.EndpointSlice{
		"ns/older": {{Endpoints: []discoveryv1.Endpoint{
			{NodeName: &n2, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{NodeName: &n1, Conditions: discoveryv1.EndpointConditions{}},
			{NodeName: &n3, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		}}},
	}
	got := LocalServices(c, services, slices)
	want := []render.LocalService{
		{Name: "ns/older", Pool: "general", VIPs: addrs("198.51.100.140"), Nodes: []string{"node-1", "node-2"}},
		{Name: "ns/newer", Pool: "general", VIPs: addrs("198.51.100.141")},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LocalServices = %+v\nwant %+v (oldest first, unready endpoints left out, no pending Service)", got, want)
	}
	byPool, _ := ServiceVIPs(c, services)
	if want := addrs("198.51.100.130"); !slicesEqual(byPool["general"], want) {
		t.Errorf("pool addresses = %v, want only the Cluster-policy Service's %v", byPool["general"], want)
	}
}

func slicesEqual(a, b []netip.Addr) bool { return slices.Equal(a, b) }

func TestRouterPlacementAndAPIServers(t *testing.T) {
	pod := func(node string, phase corev1.PodPhase, ready bool, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	pods := []*corev1.Pod{
		pod("w2", corev1.PodRunning, false, false),
		pod("w1", corev1.PodRunning, true, false),
		pod("", corev1.PodPending, false, false),
		pod("w3", corev1.PodFailed, false, false),
		pod("w4", corev1.PodRunning, true, true),
	}
	nodes, ready := RouterPlacement(pods, "w1")
	if !slices.Equal(nodes, []string{"w1", "w2"}) || !ready {
		t.Errorf("RouterPlacement = %v, %v; want [w1 w2] (scheduled, alive), true", nodes, ready)
	}
	if _, ready := RouterPlacement(pods, "w2"); ready {
		t.Errorf("w2's router is not ready")
	}

	yes, no := true, false
	eps := []*discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"198.51.100.12"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
		{Addresses: []string{"198.51.100.11"}},
		{Addresses: []string{"198.51.100.13"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
	}}}
	if got, want := APIServers(eps), addrs("198.51.100.11", "198.51.100.12"); !slices.Equal(got, want) {
		t.Errorf("APIServers = %v, want %v", got, want)
	}
}

func TestEffective(t *testing.T) {
	static, _ := loadExample(t)
	live, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.ServicePools = append(live.Spec.ServicePools, v1alpha1.ServicePool{Name: "extra", Addresses: []string{"198.51.100.200-198.51.100.210"}, Instances: 2, MaxHolders: 8})
	eff, drift, err := Effective(static, live)
	if err != nil {
		t.Fatal(err)
	}
	if drift || len(eff.Spec.ServicePools) != 2 {
		t.Errorf("a pool added in the ConfigMap: drift=%v pools=%d; want false, 2", drift, len(eff.Spec.ServicePools))
	}
	if len(static.Spec.ServicePools) != 1 {
		t.Errorf("Effective modified the static config")
	}

	// A static part changed in the ConfigMap is not taken, only noted.
	live.Spec.API.VIPs = []string{"198.51.100.9"}
	eff, drift, err = Effective(static, live)
	if err != nil || !drift || eff.Spec.API.VIPs[0] != static.Spec.API.VIPs[0] {
		t.Errorf("changed API VIP in the ConfigMap: drift=%v err=%v api=%v; want drift, the file's API VIP", drift, err, eff.Spec.API.VIPs)
	}

	// Pools that clash with the static parts are refused with their path.
	live.Spec.ServicePools[1].Addresses = []string{"198.51.100.130/33"}
	if _, _, err := Effective(static, live); err == nil || !strings.Contains(err.Error(), "spec.servicePools[1].addresses[0]") {
		t.Errorf("invalid ConfigMap pools: err = %v, want one naming spec.servicePools[1].addresses[0]", err)
	}
}

func TestParseConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: render.Namespace}}
	if _, err := ParseConfigMap(cm); err == nil || !strings.Contains(err.Error(), `no key "cluster.yaml"`) {
		t.Errorf("missing key: %v", err)
	}
	cm.Data = map[string]string{v1alpha1.ConfigMapKey: "kind: ClusterVIPs\nspec: {bogus: 1}\n"}
	if _, err := ParseConfigMap(cm); err == nil || !strings.Contains(err.Error(), "vipctl-system/vipctl-config") || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("bad config: %v, want the ConfigMap and the field named", err)
	}
}

// TestOnceWithoutBootstrapNodes: rendered without --nodes, the init
// container still lets keepalived start (a config without instances, which
// the real keepalived accepts) and says why.
func TestOnceWithoutBootstrapNodes(t *testing.T) {
	target := Target{Root: nodeRoot(t)}
	_, err := Once(t.Context(), OnceOptions{Target: target, Config: "../../examples/compact-ipv4.yaml",
		BootstrapNodes: filepath.Join(t.TempDir(), "missing.yaml"), NodeName: "master-0"})
	if !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("err = %v, want ErrNoBootstrapNodes", err)
	}
	data, err := os.ReadFile(target.path(render.KeepalivedConfPath))
	if err != nil || !strings.Contains(string(data), "router_id master_0") || strings.Contains(string(data), "vrrp_instance") {
		t.Fatalf("placeholder keepalived.conf: %v\n%s", err, data)
	}
	if drain, _ := os.ReadFile(target.path(render.DrainFile)); string(drain) != "0\n" {
		t.Errorf("drain file %q", drain)
	}
}
