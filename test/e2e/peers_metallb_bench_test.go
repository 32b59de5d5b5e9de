package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// metallbNS is the namespace MetalLB's manifests install it in.
const metallbNS = "metallb-system"

// metallbSpeakerLabels are the labels of the speaker pods in MetalLB's
// manifests; the speakers find each other's memberlist by them.
const metallbSpeakerLabels = "app=metallb,component=speaker"

// metallbTrial runs MetalLB in L2 mode for one LoadBalancer Service on
// the peers' three nodes, as its release manifests (metallb-native.yaml)
// configure it: the controller (which assigns the Service its address
// from an IPAddressPool and creates the memberlist secret) and a speaker
// per node with memberlist, its fast dead-node detection, keyed by that
// secret. They run as processes: the controller on the API's host, each
// speaker in its node's namespace with the pod environment the manifest
// gives it, its pod object in the API with the node's address, as the
// speakers list their peers' pods to join them. MetalLB only answers ARP
// for the address; kube-proxy is what takes the traffic on the node: an
// nftables DNAT of the address to the node's own echo server stands in
// for it. The Service's EndpointSlice names a ready endpoint on every node
// (externalTrafficPolicy Cluster). It injects the fault into the node
// MetalLB elected and returns the outage and the failed requests.
//
// In BGP mode (mode "bgp", MetalLB's native BGP speaker) every speaker
// peers with the lab's upstream router and announces the address; the
// fault is node-loss alone, measured by the client behind the router
// (peerLab.bgpNodeLoss).
func metallbTrial(b *testing.B, controller, speaker, mode, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		bgp := mode == "bgp"
		pl := startPeerLab(t, bgp)
		vip := peerServiceVIP
		if bgp {
			vip = peerBGPVIP
		}
		ctx := context.Background()
		agents := pl.startMetalLB(t, controller, speaker, bgp, vip+"/32")
		pl.echoService(t, nil)
		lab.WaitFor(t, 60*time.Second, "the Service's address from MetalLB", func() bool {
			s, err := pl.admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "echo", metav1.GetOptions{})
			return err == nil && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == vip
		})
		if bgp {
			outage, failed = pl.bgpNodeLoss(t)
			return
		}
		holder := metallbHolder(t, pl)
		outage, failed = pl.measure(t, "http://"+vip+":8080/", holder, scenario, agents[holder], func() {
			// MetalLB's way to take a node out of announcing.
			patch := `{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":""}}}`
			if _, err := pl.admin.CoreV1().Nodes().Patch(ctx, holder, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	})
	return outage, failed
}

// startMetalLB installs MetalLB's CRDs and the objects of its release
// manifest and of a user's configuration (metallbObjects: an
// IPAddressPool holding pool, CIDR, advertised over L2 or with bgp over
// BGP), starts the controller on the API's host and a speaker on every
// node with a DNAT of pool to the node's echo server (kube-proxy's part),
// and returns the processes, the controller's under "controller".
func (pl *peerLab) startMetalLB(t testing.TB, controller, speaker string, bgp bool, pool string) map[string]*netlab.Proc {
	t.Helper()
	ctx := context.Background()
	crds, err := filepath.Glob(fixture.Repo("bin/metallb-crds/*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("MetalLB's CRDs not in bin/metallb-crds: run hack/build-peers.sh (%v)", err)
	}
	pl.api.InstallCRDs(t, crds...)
	metallbObjects(t, pl, bgp, pool)

	env := []string{"env", "KUBECONFIG=" + pl.kubeconfig, "HOME=" + pl.home}
	agents := map[string]*netlab.Proc{}
	agents["controller"] = pl.gw.Start("metallb-controller", append(env,
		"METALLB_NAMESPACE="+metallbNS, "METALLB_ML_SECRET_NAME=memberlist", "METALLB_DEPLOYMENT=controller",
		controller, "--port=7472", "--log-level=info", "--webhook-mode=disabled", "--disable-cert-rotation")...)
	logOnFailure(t, "MetalLB", agents)

	// The memberlist secret the controller creates, where the
	// speakers' pods mount it.
	keyDir := filepath.Join(pl.home, "ml_secret_key")
	lab.WaitFor(t, 60*time.Second, "the memberlist secret", func() bool {
		s, err := pl.admin.CoreV1().Secrets(metallbNS).Get(ctx, "memberlist", metav1.GetOptions{})
		if err != nil {
			return false
		}
		if err := os.MkdirAll(keyDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keyDir, "secretkey"), s.Data["secretkey"], 0o600); err != nil {
			t.Fatal(err)
		}
		return true
	})
	for n, name := range pl.names {
		ip := pl.nodeIP(n)
		h := pl.hosts[name]
		// kube-proxy's part: the Services' addresses taken in on the
		// node and handed to its local endpoint.
		family, to := "ip", ip+":8080"
		if strings.Contains(pool, ":") {
			family, to = "ip6", "["+pl.nodeIP6(n)+"]:8080"
		}
		h.MustExec("nft", "add table "+family+" lb; add chain "+family+" lb pre { type nat hook prerouting priority -100; }; "+
			"add rule "+family+" lb pre "+family+" daddr "+pool+" tcp dport 8080 dnat to "+to)
		agents[name] = h.Start("metallb-speaker", append(env,
			"METALLB_NODE_NAME="+name, "METALLB_POD_NAME=speaker-"+name, "METALLB_HOST="+ip,
			"METALLB_ML_BIND_ADDR="+ip, "METALLB_ML_LABELS="+metallbSpeakerLabels, "METALLB_ML_BIND_PORT=7946",
			"METALLB_ML_SECRET_KEY_PATH="+keyDir, "METALLB_NAMESPACE="+metallbNS,
			speaker, "--port=7472", "--log-level=info")...)
	}
	return agents
}

// metallbHolder waits until one speaker alone has announced the
// Service for 3 s (its ServiceL2Status; until the speakers' memberlist
// has joined, each takes itself for the only one) and returns its node.
func metallbHolder(t testing.TB, pl *peerLab) string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(pl.api.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "servicel2statuses"}
	var holder string
	var since time.Time
	lab.WaitFor(t, 60*time.Second, "one speaker announcing "+peerServiceVIP, func() bool {
		l, err := dyn.Resource(gvr).Namespace(metallbNS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			since = time.Time{}
			return false
		}
		node, _, _ := unstructured.NestedString(l.Items[0].Object, "status", "node")
		if node != holder || since.IsZero() {
			holder, since = node, time.Now()
		}
		return time.Since(since) >= 3*time.Second
	})
	if pl.hosts[holder] == nil {
		t.Fatalf("ServiceL2Status names %q, not a node", holder)
	}
	return holder
}

// metallbObjects creates what MetalLB's manifests and a user's
// configuration put in the API before the Service: the namespace, the
// controller's Deployment (the memberlist secret's owner; nothing runs
// it here), the nodes with each speaker's pod, an IPAddressPool holding
// pool (CIDR) and an L2Advertisement for it, or with bgp a
// BGPAdvertisement and a BGPPeer for the lab's router.
func metallbObjects(t testing.TB, pl *peerLab, bgp bool, pool string) {
	t.Helper()
	ctx := context.Background()
	c := pl.admin
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metallbNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ServiceAccounts(metallbNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "speaker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	sel := map[string]string{"app": "metallb", "component": "controller"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "controller", Namespace: metallbNS, Labels: sel},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller"}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(metallbNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	for n, name := range pl.names {
		ip := pl.nodeIP(n)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "speaker-" + name, Namespace: metallbNS,
				Labels: map[string]string{"app": "metallb", "component": "speaker"}},
			Spec: corev1.PodSpec{NodeName: name, HostNetwork: true, ServiceAccountName: "speaker", AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker"}}},
		}
		cp, err := c.CoreV1().Pods(metallbNS).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cp.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.CoreV1().Pods(metallbNS).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn, err := dynamic.NewForConfig(pl.api.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		version, resource string
		obj               map[string]any
	}
	objects := []object{{"v1beta1", "ipaddresspools", map[string]any{"kind": "IPAddressPool", "spec": map[string]any{"addresses": []any{pool}}}}}
	if bgp {
		objects = append(objects,
			object{"v1beta2", "bgppeers", map[string]any{"kind": "BGPPeer", "spec": map[string]any{"myASN": int64(64513), "peerASN": int64(64512), "peerAddress": "198.51.100.1"}}},
			object{"v1beta1", "bgpadvertisements", map[string]any{"kind": "BGPAdvertisement", "spec": map[string]any{"ipAddressPools": []any{"peers"}}}})
	} else {
		objects = append(objects, object{"v1beta1", "l2advertisements", map[string]any{"kind": "L2Advertisement", "spec": map[string]any{"ipAddressPools": []any{"peers"}}}})
	}
	for _, o := range objects {
		obj := &unstructured.Unstructured{Object: o.obj}
		obj.SetAPIVersion("metallb.io/" + o.version)
		obj.SetName("peers")
		obj.SetNamespace(metallbNS)
		gvr := schema.GroupVersionResource{Group: "metallb.io", Version: o.version, Resource: o.resource}
		if _, err := dyn.Resource(gvr).Namespace(metallbNS).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", o.resource, err)
		}
	}
}

// echoService creates the echo LoadBalancer Service
// (externalTrafficPolicy Cluster) with annotations and, as the
// endpoint-slice and endpoints controllers would for its pods, an
// EndpointSlice and an Endpoints with a ready endpoint on every node
// (kube-vip reads Endpoints unless told otherwise).
func (pl *peerLab) echoService(t testing.TB, annotations map[string]string) {
	t.Helper()
	if err := pl.createEchoService(context.Background(), "echo", false, annotations); err != nil {
		t.Fatal(err)
	}
}

// createEchoService is echoService for a Service called name, IPv6 alone
// if ipv6.
func (pl *peerLab) createEchoService(ctx context.Context, name string, ipv6 bool, annotations map[string]string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Annotations: annotations},
		// No node ports: nothing here takes traffic through them, and
		// 5000 Services would exhaust their range.
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyTypeCluster, AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
	addressType, nodeIP := discoveryv1.AddressTypeIPv4, pl.nodeIP
	if ipv6 {
		single := corev1.IPFamilyPolicySingleStack
		svc.Spec.IPFamilyPolicy, svc.Spec.IPFamilies = &single, []corev1.IPFamily{corev1.IPv6Protocol}
		addressType, nodeIP = discoveryv1.AddressTypeIPv6, pl.nodeIP6
	}
	if _, err := pl.admin.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ready := true
	port, proto, portName := int32(8080), corev1.ProtocolTCP, ""
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: svc.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: addressType,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: port, Protocol: proto}}}
	for n, node := range pl.names {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{nodeIP(n)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
		//nolint:staticcheck // Endpoints: what kube-vip reads by default.
		subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: nodeIP(n), NodeName: &node})
	}
	if _, err := pl.admin.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return err
	}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: svc.Namespace}, Subsets: []corev1.EndpointSubset{subset}}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	_, err := pl.admin.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
	return err
}
