package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// warnings collects the apiserver's warning headers (Pod Security's
// "would violate" among them).
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// mirror makes p what the kubelet creates for a static pod: a mirror pod
// of that spec, named after and bound to its node, with the annotation
// that spares it a ServiceAccount.
func mirror(p *corev1.Pod) {
	p.Name += "-master-0"
	p.Spec.NodeName = "master-0"
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[corev1.MirrorPodAnnotationKey] = "static"
}

// TestRenderedNamespacePassesPodSecurity: a real kube-apiserver whose
// PodSecurity admission plugin holds every namespace without labels of
// its own to restricted (as a hardened cluster does, and as OpenShift's
// label syncer would set vipctl-system from the allocator's SCCs). The
// rendered namespace names its level, so the mirror pods the kubelet
// creates for vipctl's static pods (keepalived with the sidecar and, with
// bgp pools, FRR; haproxy) are admitted without a warning, and so are the
// allocator's Deployment and the pods it makes. The same keepalived pod
// in a namespace without those labels is refused: what a mirror pod of
// the namespace as rendered before met.
func TestRenderedNamespacePassesPodSecurity(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	srv := testapiserver.StartWith(t, testapiserver.Options{PodSecurity: "restricted"})
	cfg := srv.AdminConfig()
	warned := &warnings{}
	cfg.WarningHandler = warned
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The rendered objects as `oc apply -f out/manifests/` creates them
	// (namespace first, the allocator's ServiceAccount with it).
	c := fixture.Example(t, "compact-ipv4.yaml")
	for _, o := range manifests.Allocator(c) {
		if sa, ok := o.(*corev1.ServiceAccount); ok {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, manifests.Namespace(c), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	admitted := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
		if w := warned.take(); len(w) > 0 {
			t.Errorf("%s: warnings %q", what, w)
		}
	}
	checked := map[string]bool{}
	for _, ex := range []string{"compact-ipv4.yaml", "bgp-two-racks.yaml", "pools-only.yaml"} {
		c := fixture.Example(t, ex)
		pods := []*corev1.Pod{manifests.KeepalivedPod(c)}
		if !c.PoolsOnly() {
			pods = append(pods, manifests.HaproxyPod(c))
		}
		for _, p := range pods {
			mirror(p)
			_, err := cs.CoreV1().Pods(onnode.Namespace).Create(ctx, p, dryRun)
			admitted(ex+": mirror pod "+p.Name, err)
			for _, ctr := range p.Spec.Containers {
				checked[ctr.Name] = true
			}
		}
		for _, o := range manifests.Allocator(c) {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			_, err := cs.AppsV1().Deployments(onnode.Namespace).Create(ctx, d, dryRun)
			admitted(ex+": allocator Deployment", err)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-x", Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
			_, err = cs.CoreV1().Pods(onnode.Namespace).Create(ctx, pod, dryRun)
			admitted(ex+": allocator pod", err)
			checked["allocator"] = true
		}
	}
	for _, want := range []string{"keepalived", "runtimecfg", "haproxy", "frr", "allocator"} {
		if !checked[want] {
			t.Errorf("no pod with container %s was checked", want)
		}
	}

	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := manifests.KeepalivedPod(fixture.Example(t, "compact-ipv4.yaml"))
	mirror(p)
	p.Namespace = plain.Name
	_, err = cs.CoreV1().Pods(plain.Name).Create(ctx, p, dryRun)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("keepalived pod in a namespace without Pod Security labels: err = %v, want refused by PodSecurity (the test proves nothing otherwise)", err)
	}
}
