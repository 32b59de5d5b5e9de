package cluster

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/fixture"
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

func TestServiceVIPs(t *testing.T) {
	c := fixture.Example(t, "compact-ipv4.yaml")
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
	byPool, _, orphans := Compile(c).ServiceAddresses(services)
	if got, want := byPool["general"], fixture.Addrs("198.51.100.130", "198.51.100.131"); !slices.Equal(got, want) {
		t.Errorf("pool general = %v, want %v (sorted, shared address once, other classes and types ignored)", got, want)
	}
	if want := fixture.Addrs("203.0.113.7"); !slices.Equal(orphans, want) {
		t.Errorf("orphans = %v, want %v", orphans, want)
	}
}

func TestLocalServices(t *testing.T) {
	c := fixture.Example(t, "compact-ipv4.yaml")
	local := corev1.ServiceExternalTrafficPolicyLocal
	services := []*corev1.Service{
		svc("newer", 5, nil, local, "198.51.100.141"),
		svc("older", 2, nil, local, "198.51.100.140"),
		svc("cluster", 1, nil, corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.130"),
		svc("pending", 1, nil, local),
	}
	yes, no := true, false
	n1, n2, n3, n4, n5, n6 := "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"
	slices := map[string][]*discoveryv1.EndpointSlice{
		"ns/older": {{Endpoints: []discoveryv1.Endpoint{
			{NodeName: &n2, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{NodeName: &n1, Conditions: discoveryv1.EndpointConditions{}},
			// Running, not ready (its probe fails): unready.
			{NodeName: &n3, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			// Unready beside a draining one: draining.
			{NodeName: &n4, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &no}},
			// Unready beside a ready one: ready.
			{NodeName: &n1, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			// Unready and stopping: gone.
			{NodeName: &n6, Conditions: discoveryv1.EndpointConditions{Ready: &no, Terminating: &yes}},
			// Stopping gracefully and still serving: draining.
			{NodeName: &n4, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes}},
			// Stopping, no longer serving: gone.
			{NodeName: &n5, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &no, Terminating: &yes}},
			// Stopping on a node that also runs a ready one: ready.
			{NodeName: &n2, Conditions: discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes}},
		}}},
	}
	_, got, _ := Compile(c).ServiceAddresses(services)
	Endpoints(got, slices)
	want := []LocalService{
		{Name: "ns/older", Pool: "general", VIPs: fixture.Addrs("198.51.100.140"), Nodes: []string{"node-1", "node-2"}, Draining: []string{"node-4"}, Unready: []string{"node-3"}},
		{Name: "ns/newer", Pool: "general", VIPs: fixture.Addrs("198.51.100.141")},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LocalServices = %+v\nwant %+v (oldest first, running unready endpoints unready, stopping ones that serve draining, no pending Service)", got, want)
	}
	byPool, _, _ := Compile(c).ServiceAddresses(services)
	if want := fixture.Addrs("198.51.100.130"); !slicesEqual(byPool["general"], want) {
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
	if got, want := APIServers(eps), fixture.Addrs("198.51.100.11", "198.51.100.12"); !slices.Equal(got, want) {
		t.Errorf("APIServers = %v, want %v", got, want)
	}
}

// TestReservedAddressesNotAnnounced: a Service whose status names a
// node's own address (or its network's broadcast address) is not
// announced, whoever wrote the status: another node holding it would take
// that node's traffic. The rest is announced as before.
func TestReservedAddressesNotAnnounced(t *testing.T) {
	c := fixture.Example(t, "compact-ipv4.yaml")
	c.Spec.ServicePools[0].Addresses = []string{"198.51.100.0/24"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}}}
	local := svc("local", 1, nil, corev1.ServiceExternalTrafficPolicyLocal, "198.51.100.255")
	obs := Compile(c).Observe(Observed{
		Nodes:    []*corev1.Node{node},
		Services: []*corev1.Service{svc("hijack", 1, nil, "", "198.51.100.11"), svc("fine", 2, nil, "", "198.51.100.130"), local},
	})
	st, skipped := obs.State, obs.Skipped
	if got, want := st.ServiceVIPs["general"], fixture.Addrs("198.51.100.130"); !slices.Equal(got, want) {
		t.Errorf("announced %v, want %v", got, want)
	}
	if len(st.LocalServices) != 0 {
		t.Errorf("a Local Service on the broadcast address is announced: %+v", st.LocalServices)
	}
	want := []string{
		"service address 198.51.100.11 is the address of node master-0: not announced",
		"service address 198.51.100.255 is the broadcast address of machine network 198.51.100.0/24: not announced",
	}
	if len(skipped) != len(want) {
		t.Fatalf("skipped = %v, want %v", skipped, want)
	}
	for i := range want {
		if skipped[i].Error() != want[i] {
			t.Errorf("skipped[%d] = %s, want %s", i, skipped[i], want[i])
		}
	}
}

// TestSlicesRead holds SlicesRead to Observe: a change to a Service's
// EndpointSlice changes the observed state exactly when SlicesRead says
// Observe reads that Service's slices (the sidecar renders on no other).
func TestSlicesRead(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "compact-ipv4.yaml")
	local := corev1.ServiceExternalTrafficPolicyLocal
	clusterIP := svc("clusterip", 4, nil, local)
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	services := []*corev1.Service{
		svc("cluster", 1, nil, corev1.ServiceExternalTrafficPolicyCluster, "198.51.100.130"),
		svc("local", 2, nil, local, "198.51.100.140"),
		svc("other-class", 3, ptrTo("example.com/other"), local, "198.51.100.141"),
		clusterIP,
	}
	slice := func(ns, service, node, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: &node}},
		}
	}
	base := func() []*discoveryv1.EndpointSlice {
		out := []*discoveryv1.EndpointSlice{slice("default", "kubernetes", "master-0", "198.51.100.11")}
		for _, s := range services {
			out = append(out, slice(s.Namespace, s.Name, "worker-0", "10.128.0.1"))
		}
		return out
	}
	m := Compile(c)
	before := m.Observe(Observed{Services: services, Slices: base()}).State
	byName := map[string]*corev1.Service{}
	for _, s := range services {
		byName[NamespacedName(s)] = s
	}
	for i := range base() {
		slices := base()
		es := slices[i]
		es.Endpoints[0].NodeName, es.Endpoints[0].Addresses = ptrTo("worker-1"), []string{"198.51.100.12"}
		name := SliceService(es)
		t.Run(name, func(t *testing.T) {
			after := m.Observe(Observed{Services: services, Slices: slices}).State
			if got, want := fmt.Sprint(after) != fmt.Sprint(before), m.Class.SlicesRead(name, byName[name]); got != want {
				t.Errorf("a change to %s's slice changes the observed state: %v; SlicesRead says %v", name, got, want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestExternalIPs: a pool with externalIPs on announces the addresses of
// its range that Services of admitted namespaces name in spec.externalIPs,
// whatever their type, Local ones by their own instance; a pool without it,
// another namespace, an anchor, an address outside every pool and another
// class's Service are not announced, and none is an orphan.
func TestExternalIPs(t *testing.T) {
	c := fixture.Example(t, "compact-ipv4.yaml")
	c.Spec.ServicePools[0].ExternalIPs = true
	c.Spec.ServicePools[0].Namespaces = []string{"ns"}
	m := Compile(c)
	anchor := m.Pools[0].Anchors(true)[0]
	ext := func(name, ns string, ips ...string) *corev1.Service {
		s := svc(name, 1, nil, "")
		s.Namespace = ns
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.ExternalIPs = ips
		return s
	}
	local := ext("local", "ns", "198.51.100.150")
	local.Spec.Type = corev1.ServiceTypeNodePort
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	other := "example.com/other"
	foreign := ext("foreign", "ns", "198.51.100.151")
	foreign.Spec.LoadBalancerClass = &other
	services := []*corev1.Service{
		ext("web", "ns", "198.51.100.140", "203.0.113.9", "not-an-ip"),
		ext("tenant", "elsewhere", "198.51.100.141"),
		ext("anchor", "ns", anchor.String()),
		local,
		foreign,
	}
	byPool, locals, orphans := m.ServiceAddresses(services)
	if got, want := byPool["general"], fixture.Addrs("198.51.100.140"); !slices.Equal(got, want) {
		t.Errorf("pool general = %v, want %v", got, want)
	}
	if len(locals) != 1 || locals[0].Name != "ns/local" || !slices.Equal(locals[0].VIPs, fixture.Addrs("198.51.100.150")) {
		t.Errorf("Local Services = %+v, want ns/local with 198.51.100.150", locals)
	}
	if len(orphans) != 0 {
		t.Errorf("orphans = %v, want none: external IPs outside the pools are not vipctl's", orphans)
	}
	var refused []string
	for _, s := range services {
		for _, e := range m.Pools.ExternalIPs(s, m.Class) {
			if e.Err != nil {
				refused = append(refused, e.Err.Error())
			}
		}
	}
	want := []string{
		"external IP 198.51.100.141: pool general admits Services of namespaces ns only",
		"external IP " + anchor.String() + " is an anchor of pool general (the address of its VRRP instance), which no Service gets",
	}
	if !slices.Equal(refused, want) {
		t.Errorf("refusals = %q\nwant %q", refused, want)
	}
	c.Spec.ServicePools[0].ExternalIPs = false
	if byPool, _, _ := Compile(c).ServiceAddresses(services); len(byPool["general"]) != 0 {
		t.Errorf("a pool without externalIPs announces %v", byPool["general"])
	}
	if !(Class{}).SlicesRead("ns/local", local) {
		t.Error("the endpoints of a Local Service with external IPs are not read")
	}
}

// TestClass: which Services each spec.loadBalancerClass serves, and
// whose external IPs it leaves to another class.
func TestClass(t *testing.T) {
	t.Parallel()
	ours, custom, other := v1alpha1.LoadBalancerClass, "example.com/lb", "metallb.io/metallb"
	none := svc("none", 1, nil, "")
	clusterIP := svc("cip", 1, nil, "")
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	services := map[string]*corev1.Service{
		"no class": none, "vipctl.io/keepalived": svc("ours", 1, &ours, ""), "example.com/lb": svc("custom", 1, &custom, ""),
		"metallb.io/metallb": svc("other", 1, &other, ""), "ClusterIP": clusterIP,
	}
	for _, tc := range []struct {
		spec         *v1alpha1.LoadBalancerClassSpec
		serves, left []string
	}{
		{nil, []string{"no class", "vipctl.io/keepalived"}, []string{"example.com/lb", "metallb.io/metallb"}},
		{&v1alpha1.LoadBalancerClassSpec{Only: true}, []string{"vipctl.io/keepalived"}, []string{"example.com/lb", "metallb.io/metallb"}},
		{&v1alpha1.LoadBalancerClassSpec{Name: custom}, []string{"example.com/lb", "no class"}, []string{"metallb.io/metallb", "vipctl.io/keepalived"}},
		{&v1alpha1.LoadBalancerClassSpec{Name: custom, Only: true}, []string{"example.com/lb"}, []string{"metallb.io/metallb", "vipctl.io/keepalived"}},
	} {
		c := fixture.Example(t, "compact-ipv4.yaml")
		c.Spec.LoadBalancerClass = tc.spec
		class := Compile(c).Class
		var serves, left []string
		for name, s := range services {
			if class.Serves(s) {
				serves = append(serves, name)
			}
			if class.Other(s) {
				left = append(left, name)
			}
		}
		slices.Sort(serves)
		slices.Sort(left)
		if !slices.Equal(serves, tc.serves) || !slices.Equal(left, tc.left) {
			t.Errorf("%s: serves %q, leaves %q to their class; want %q, %q", class.Describe(), serves, left, tc.serves, tc.left)
		}
	}
}
