package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/test/lab"
)

// lbClass is the class the lab's vipctl serves in TestLoadBalancerClassOnly:
// a name of the cluster's own, not the default.
const lbClass = "example.com/lb"

// classOnlyPools is sidecarPools with spec.loadBalancerClass named lbClass
// and only: the Services without a class belong to another
// implementation; classPools the same class without only.
const (
	classOnlyPools = classPools + `    only: true
`
	classPools = sidecarPools + `  loadBalancerClass:
    name: ` + lbClass + `
`
)

// TestLoadBalancerClassOnly: with spec.loadBalancerClass naming a class
// of the cluster's own and only, beside
// another implementation of the default class (played here by the test,
// which writes its Service's status as MetalLB would), vipctl allocates,
// announces and answers for the Services of its class only: a Service
// without a class keeps the address the other implementation gave it,
// and no node carries it, although it lies in vipctl's pool. `vipctl
// update` turning only off (a day-2 edit, no MachineConfig) has vipctl
// take that Service over, its address kept, and answer for it, while the
// classed Service's address keeps answering (real keepalived, the
// sidecars and the allocator against the real apiserver).
func TestLoadBalancerClassOnly(t *testing.T) {
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", classOnlyPools), sidecarSpecs())
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	ctx := context.Background()
	workers := []string{"worker-0", "worker-1"}
	for _, w := range workers {
		kc.ByName[w].StartEcho(t, "0.0.0.0:8080")
	}

	// The other implementation's Service, its address from the same
	// range, written before vipctl's own Service exists.
	const theirs = "198.51.100.180"
	plain := kc.CreateLBService(t, "plain", "")
	plain.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: theirs}}
	if _, err := kc.Admin.CoreV1().Services("default").UpdateStatus(ctx, plain, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	classed := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "classed", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr.To(lbClass),
			Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := kc.Admin.CoreV1().Services("default").Create(ctx, classed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := waitServiceIPs(t, kc.Admin, "default", "classed", 1)[0]
	// Each worker's render with the classed address read every Service,
	// the plain one's status included.
	for _, w := range workers {
		kc.WaitConf(t, w, "the classed Service's address", func(c string) bool { return strings.Contains(c, ours+"/32") })
		if strings.Contains(kc.KeepalivedConf(t, w), theirs+"/") {
			t.Errorf("%s carries %s, the address another implementation gave a Service without a class", w, theirs)
		}
	}
	p := kc.Poll("http://"+ours+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, "the classed Service's address answers from the client", func() bool { ok, _ := p.Counts(); return ok > 5 })
	if h := kc.Holders(theirs); len(h) != 0 {
		t.Errorf("%s held by %v, want by no node of vipctl's", theirs, h)
	}
	if got := serviceIPs(t, kc, "plain"); len(got) != 1 || got[0] != theirs {
		t.Errorf("the Service without a class has %v, want the other implementation's %s left alone", got, theirs)
	}

	// Only off: vipctl serves the Services without a class again.
	kubeconfig, file := updateFiles(t, kc.API, clusterYAML("fast", "unicast", classPools))
	code, out, errOut := vipctl(t, "update", "-f", file, "--kubeconfig", kubeconfig)
	if code != 0 {
		t.Fatalf("update: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"~ spec.loadBalancerClass class " + lbClass + " only -> class " + lbClass + " or none", "no MachineConfig change"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("update's output lacks %q:\n%s%s", want, out, errOut)
		}
	}
	for _, w := range workers {
		kc.WaitConf(t, w, theirs, func(c string) bool { return strings.Contains(c, theirs+"/32") })
	}
	q := kc.Poll("http://"+theirs+":8080/", 20*time.Millisecond)
	lab.WaitFor(t, 30*time.Second, theirs+" answers from the client", func() bool { ok, _ := q.Counts(); return ok > 5 })
	q.Stop()
	if got := serviceIPs(t, kc, "plain"); len(got) != 1 || got[0] != theirs {
		t.Errorf("the Service without a class has %v after only went off, want %s kept", got, theirs)
	}
	p.WantNoFailures(t, ours+" while the class changed")
}

// serviceIPs are the addresses in the Service default/name's status.
func serviceIPs(t *testing.T, kc *lab.KubeCluster, name string) []string {
	t.Helper()
	s, err := kc.Admin.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}
