package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/test/lab"
)

// Two pools on the workers: web announces the external IPs Services of
// namespace default name, closed (no externalIPs) announces none.
const externalIPPools = `  servicePools:
    - name: web
      addresses: [198.51.100.128/26]
      nodeSelector: {pool: web}
      namespaces: [default]
      externalIPs: true
    - name: closed
      addresses: [198.51.100.64/27]
      nodeSelector: {pool: web}
`

// TestExternalIPsAnnounced: a ClusterIP Service naming an address of a
// pool with externalIPs gets it held by a pool node and answered from the
// client namespace (real keepalived, the sidecars and the allocator
// against the real apiserver); the allocator refuses that address to a
// LoadBalancer Service that asks for it. An address named by a Service of
// a namespace the pool does not admit, or in a pool without externalIPs,
// reaches no keepalived.conf, the first with a Warning Event on the
// Service. Removing the address from the Service takes it off the nodes.
func TestExternalIPsAnnounced(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", externalIPPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	ctx := context.Background()
	create := func(ns, name string, typ corev1.ServiceType, ips ...string) *corev1.Service {
		t.Helper()
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 8080}}, ExternalIPs: ips}}
		out, err := kc.Admin.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const ext, tenantIP, closedIP, added = "198.51.100.140", "198.51.100.141", "198.51.100.70", "198.51.100.142"
	svc := create("default", "ext", corev1.ServiceTypeClusterIP, ext)
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the external IP", func(c string) bool { return strings.Contains(c, ext+"/32") })
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}
	p := kc.Poll("http://"+ext+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the external IP answers from the client", func() bool { ok, _ := p.Counts(); return ok > 5 })
	p.Stop()
	if h := kc.Holders(ext); len(h) != 1 {
		t.Errorf("%s held by %v, want one node", ext, h)
	}

	// The allocator keeps the address for the Service that names it.
	lb := kc.CreateLBService(t, "asks", ext)
	waitEvent(t, kc, "default", lb.Name, "AllocationFailed", string(allocator.ReasonInUse))
	if got, err := kc.Admin.CoreV1().Services("default").Get(ctx, lb.Name, metav1.GetOptions{}); err != nil || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("the LoadBalancer Service asking for %s got %v (err %v), want nothing", ext, got.Status.LoadBalancer.Ingress, err)
	}

	// Another namespace, and a pool without externalIPs: not announced.
	if _, err := kc.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("tenant", "squat", corev1.ServiceTypeClusterIP, tenantIP)
	waitEvent(t, kc, "tenant", "squat", allocator.EventExternalIPRefused, string(allocator.ReasonNotAllowed))
	create("default", "closed", corev1.ServiceTypeClusterIP, closedIP)
	// A later change the sidecars must render proves they saw both.
	svc.Spec.ExternalIPs = []string{ext, added}
	if _, err := kc.Admin.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, "the added external IP", func(c string) bool { return strings.Contains(c, added+"/32") })
		c := kc.KeepalivedConf(t, w)
		for _, ip := range []string{tenantIP, closedIP} {
			if strings.Contains(c, ip+"/32") {
				t.Errorf("%s announces %s", w, ip)
			}
		}
	}

	// The Service lets go of its first address: so do the nodes.
	cur, err := kc.Admin.CoreV1().Services("default").Get(ctx, "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.ExternalIPs = []string{added}
	if _, err := kc.Admin.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		kc.WaitConf(t, w, ext+" gone", func(c string) bool { return !strings.Contains(c, ext+"/32") && strings.Contains(c, added+"/32") })
	}
	lab.WaitFor(t, 15*time.Second, ext+" off every node", func() bool { return len(kc.Holders(ext)) == 0 })
}

// waitEvent waits for a Warning Event with reason on the Service ns/name
// whose message starts with prefix.
func waitEvent(t *testing.T, kc *lab.KubeCluster, ns, name, reason, prefix string) {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name, "involvedObject.kind": "Service", "reason": reason}.AsSelector().String()
	lab.WaitFor(t, 30*time.Second, "Event "+reason+" on "+ns+"/"+name, func() bool {
		evs, err := kc.Admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning && strings.HasPrefix(evs.Items[0].Message, prefix)
	})
}
