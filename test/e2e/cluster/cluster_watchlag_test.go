package cluster

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/clusterlab"
)

// claimWatch watches the Nodes through one kube-apiserver, not through
// the VIP, and records when it first delivers a claim of a VIP by
// another node than the one lost. A watch is served from the apiserver's
// watch cache, fed by its own etcd watch: it tells whether a controller
// watching through that apiserver (the allocator's status writer) could
// have known of the new holder when a direct read did
// (docs/benchmarks/cluster.md, "The ClusterVIPs status after a move").
type claimWatch struct {
	server string
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen time.Time
	err  error
}

// watchClaims starts a claimWatch through each control-plane node's
// kube-apiserver but lost's.
func watchClaims(t *testing.T, c *clusterlab.Cluster, lost, vip string) []*claimWatch {
	var out []*claimWatch
	for _, m := range c.Masters() {
		if m.Name == lost {
			continue
		}
		cfg := rest.CopyConfig(c.AdminConfig)
		cfg.Host = "https://" + net.JoinHostPort(m.Spec.IP4, "6443")
		cfg.Timeout = 0
		ctx, cancel := context.WithCancel(context.Background())
		w := &claimWatch{server: m.Name, cancel: cancel, done: make(chan struct{})}
		go w.run(ctx, kubernetes.NewForConfigOrDie(cfg), lost, vip)
		out = append(out, w)
	}
	t.Cleanup(func() {
		for _, w := range out {
			w.stop()
		}
	})
	return out
}

func (w *claimWatch) run(ctx context.Context, kube kubernetes.Interface, lost, vip string) {
	defer close(w.done)
	rv := ""
	for ctx.Err() == nil {
		wi, err := kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			w.setErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Error {
				continue
			}
			rv = n.ResourceVersion
			if n.Name != lost && strings.Contains(n.Annotations[v1alpha1.AnnotationNodeVIPs], vip) {
				w.mu.Lock()
				if w.seen.IsZero() {
					w.seen = time.Now()
				}
				w.mu.Unlock()
			}
		}
		wi.Stop()
	}
}

func (w *claimWatch) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

func (w *claimWatch) stop() {
	w.cancel()
	<-w.done
}

// report says when the watch delivered the claim, from t0.
func (w *claimWatch) report(t0 time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen.IsZero() {
		s := "through " + w.server + "'s kube-apiserver: not delivered"
		if w.err != nil {
			s += " (last error: " + w.err.Error() + ")"
		}
		return s
	}
	return "through " + w.server + "'s kube-apiserver: " + w.seen.Sub(t0).Round(10*time.Millisecond).String()
}
