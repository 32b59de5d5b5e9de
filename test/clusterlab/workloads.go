package clusterlab

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
)

// The workloads.
const (
	// WorkloadNS holds the echo Deployment and its Services.
	WorkloadNS = "lab"
	EchoName   = "echo"
	// EchoPort is where the echo pods listen, ServicePort where every
	// Service answers.
	EchoPort    = 8080
	ServicePort = 80
	// RouterName is the default IngressController's router Deployment,
	// as OpenShift names it.
	RouterName       = "router-default"
	RouterPort       = 80
	routerHealthPort = v1alpha1.DefaultRouterHealthPort
)

// Service is one LoadBalancer Service of the echo Deployment.
type Service struct {
	Name   string
	Pool   string
	Policy corev1.ServiceExternalTrafficPolicy
}

// Services are the echo Deployment's LoadBalancer Services: each pool
// with each traffic policy.
var Services = []Service{
	{Name: "vrrp-cluster", Pool: PoolVRRP, Policy: corev1.ServiceExternalTrafficPolicyCluster},
	{Name: "vrrp-local", Pool: PoolVRRP, Policy: corev1.ServiceExternalTrafficPolicyLocal},
	{Name: "sidecar-cluster", Pool: PoolSidecar, Policy: corev1.ServiceExternalTrafficPolicyCluster},
	{Name: "sidecar-local", Pool: PoolSidecar, Policy: corev1.ServiceExternalTrafficPolicyLocal},
	{Name: "bgp-cluster", Pool: PoolBGP, Policy: corev1.ServiceExternalTrafficPolicyCluster},
	{Name: "bgp-local", Pool: PoolBGP, Policy: corev1.ServiceExternalTrafficPolicyLocal},
}

// podEnv gives a container its pod's and node's names, which the echo
// servers answer with.
func podEnv() []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	return []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("NODE_NAME", "spec.nodeName")}
}

// echoContainer is labprobe serving HTTP on port, answering every request
// with body (the kubelet expands $(POD_NAME) and $(NODE_NAME)).
func (c *Cluster) echoContainer(name string, port int, body string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           kubeletlab.ImageName(c.t, filepath.Join(c.bin, "labprobe-image.tar")),
		ImagePullPolicy: corev1.PullNever,
		// After SIGTERM (the preStop sleep over) requests in flight
		// are answered for up to 5 s of the 10 the grace period leaves.
		Command: []string{"/labprobe", "echo", "-listen", "[::]:" + itoa(port), "-body", body, "-drain", "5s", "-out", "/dev/null"},
		Env:     podEnv(),
		Ports:   []corev1.ContainerPort{{ContainerPort: int32(port)}},
		// A small request, as any real workload has: a BestEffort pod gets
		// the least CPU weight there is, and its answers would come late
		// whenever the machine is busy.
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
	}
}

// echoDeployment answers with POD@NODE on EchoPort. A pod going away
// keeps serving for a few seconds after it is no longer ready (preStop
// sleep), as an application that drains does: its endpoint is then
// terminating, and kube-proxy and vipctl move traffic off it first.
func (c *Cluster) echoDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	ctr := c.echoContainer("echo", EchoPort, "$(POD_NAME)@$(NODE_NAME)")
	ctr.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt(EchoPort), Path: "/"}},
		// Kubernetes' default threshold: on two cores shared with the
		// whole cluster a probe times out now and then, and one miss
		// must not take a pod out of its Services.
		PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3,
	}
	ctr.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 10}}}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: WorkloadNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt(0)), MaxSurge: ptr.To(intstr.FromInt(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{ctr},
					TerminationGracePeriodSeconds: ptr.To(int64(20)),
				},
			},
		},
	}
}

// service is a dual-stack LoadBalancer Service of the pool, selecting the
// pods labelled app=app.
func service(s Service, app string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: WorkloadNS, Annotations: map[string]string{v1alpha1.AnnotationPool: s.Pool}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Selector:              map[string]string{"app": app},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: ServicePort, TargetPort: intstr.FromInt(EchoPort), Protocol: corev1.ProtocolTCP}},
			IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicyRequireDualStack),
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			ExternalTrafficPolicy: s.Policy,
		},
	}
}

// routerDeployment stands in for the default IngressController's
// routers: host network, the router's ports (80, and the health port
// vipctl's keepalived checks), two replicas on two nodes, labelled as
// the ingress operator labels them.
func (c *Cluster) routerDeployment() *appsv1.Deployment {
	labels := map[string]string{v1alpha1.RouterDeploymentLabel: v1alpha1.DefaultIngressController}
	health := c.echoContainer("health", routerHealthPort, "ok")
	health.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt(routerHealthPort), Path: "/healthz/ready"}},
		// Kubernetes' default threshold: on two cores shared with the
		// whole cluster a probe times out now and then, and one miss
		// must not take a pod out of its Services.
		PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3,
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: RouterName, Namespace: v1alpha1.DefaultRouterNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers:  []corev1.Container{c.echoContainer("router", RouterPort, "router@$(NODE_NAME)"), health},
				},
			},
		},
	}
}

// namespaces are the workloads' namespaces.
func (c *Cluster) namespaces() []runtime.Object {
	var out []runtime.Object
	for _, ns := range []string{WorkloadNS, v1alpha1.DefaultRouterNamespace} {
		out = append(out, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	return out
}

// disruptionBudget keeps one pod of the app available through voluntary
// disruptions (a node's drain evicts the other first, and the last only
// once a replacement is ready elsewhere), as any workload with two
// replicas that must not go down has.
func disruptionBudget(ns, name string, labels map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
}

// workloads are the echo Deployment, its Services and the routers, each
// Deployment with its PodDisruptionBudget.
func (c *Cluster) workloads() []runtime.Object {
	objs := []runtime.Object{
		c.echoDeployment(EchoName, 2),
		disruptionBudget(WorkloadNS, EchoName, map[string]string{"app": EchoName}),
		c.routerDeployment(),
		disruptionBudget(v1alpha1.DefaultRouterNamespace, RouterName, map[string]string{v1alpha1.RouterDeploymentLabel: v1alpha1.DefaultIngressController}),
	}
	for _, s := range Services {
		objs = append(objs, service(s, EchoName))
	}
	return objs
}

// MoverName is a one-pod echo Deployment pinned to one node at a time,
// behind a Local Service of each pool (MoverServices): moving it to
// another node moves each Service's only endpoint, make-before-break
// (the new pod ready first, the old one serving through its preStop).
const MoverName = "mover"

// moverPreStop is how long, in seconds, the mover's old pod serves
// after it starts terminating.
const moverPreStop = 20

// MoverServices are the mover's Services, Local in each pool.
var MoverServices = []Service{
	{Name: "mover-vrrp", Pool: PoolVRRP, Policy: corev1.ServiceExternalTrafficPolicyLocal},
	{Name: "mover-sidecar", Pool: PoolSidecar, Policy: corev1.ServiceExternalTrafficPolicyLocal},
	{Name: "mover-bgp", Pool: PoolBGP, Policy: corev1.ServiceExternalTrafficPolicyLocal},
}

// PlaceMover runs the mover on node: it creates the Deployment and its
// Services, or moves the one pod there by the Deployment's node
// selector, and waits until the pod runs there alone, ready, and every
// Service's endpoints say so.
func (c *Cluster) PlaceMover(t testing.TB, node string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	ds := c.Admin.AppsV1().Deployments(WorkloadNS)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ctx, cancel := callCtx()
		defer cancel()
		d, err := ds.Get(ctx, MoverName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			d = c.echoDeployment(MoverName, 1)
			// A longer drain than the echo Deployment's: the old pod
			// serves until the new node holds the address, which on
			// CI's loaded cores may take the new node's sync plus
			// Master_Down and more (docs/runtimecfg.md advises a few
			// seconds; this leaves CI room).
			d.Spec.Template.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds = moverPreStop
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(moverPreStop + 10))
			d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			if _, err := ds.Create(ctx, d, metav1.CreateOptions{}); err != nil {
				return err
			}
			for _, s := range MoverServices {
				if _, err := c.Admin.CoreV1().Services(WorkloadNS).Create(ctx, service(s, MoverName), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		_, err = ds.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("placing %s on %s: %v", MoverName, node, err)
	}
	c.waitDeployment(t, WorkloadNS, MoverName, time.Until(deadline))
	// The old pod is gone (not merely terminating): its preStop and
	// grace are over.
	pods := c.Admin.CoreV1().Pods(WorkloadNS)
	if !lab.WaitUntil(time.Until(deadline), func() bool {
		ctx, cancel := callCtx()
		defer cancel()
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + MoverName})
		return err == nil && len(l.Items) == 1 && l.Items[0].Spec.NodeName == node && l.Items[0].DeletionTimestamp == nil
	}) {
		c.DumpLogs()
		fatalf(t, "%s's pods not one on %s within %s", MoverName, node, timeout)
	}
	for _, s := range MoverServices {
		if !lab.WaitUntil(time.Until(deadline), func() bool { return slices.Equal(c.EndpointNodes(t, s.Name), []string{node}) }) {
			c.DumpLogs()
			fatalf(t, "Service %s: endpoints on %v, want %s alone", s.Name, c.EndpointNodes(t, s.Name), node)
		}
	}
}

// RemoveMover deletes the mover's Deployment and Services (PlaceMover),
// so that later scenarios' drains find no pod pinned to a node. Its pod
// ends in the background, through its preStop.
func (c *Cluster) RemoveMover(t testing.TB) {
	t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	for _, s := range MoverServices {
		if err := c.Admin.CoreV1().Services(WorkloadNS).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting Service %s: %v", s.Name, err)
		}
	}
	if err := c.Admin.AppsV1().Deployments(WorkloadNS).Delete(ctx, MoverName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting Deployment %s: %v", MoverName, err)
	}
}

// ScaleEcho sets the echo Deployment's replicas and waits until they are
// all available.
func (c *Cluster) ScaleEcho(t testing.TB, replicas int32) {
	t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	ds := c.Admin.AppsV1().Deployments(WorkloadNS)
	s, err := ds.GetScale(ctx, EchoName, metav1.GetOptions{})
	if err == nil {
		s.Spec.Replicas = replicas
		_, err = ds.UpdateScale(ctx, EchoName, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", EchoName, replicas, err)
	}
	c.waitDeployment(t, WorkloadNS, EchoName, 3*time.Minute)
}
