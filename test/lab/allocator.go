package lab

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// As the CLI sets them: the status writes' client, and the Events' own.
const (
	allocatorQPS, allocatorBurst   = 50, 100
	allocatorEventQPS, eventsBurst = 25, 100
)

// Allocator is one in-process allocator replica using the
// ServiceAccount's token.
type Allocator struct {
	*allocator.Controller
	Metrics *allocator.Metrics
	// Registry holds Metrics, for a test that serves them to a scraper.
	Registry *prometheus.Registry
	Log      *LogBuffer
	cancel   context.CancelFunc
	done     chan struct{}
}

// Stop ends the replica (releasing its Lease if it leads) and waits for it.
func (r *Allocator) Stop() {
	r.cancel()
	<-r.done
}

// Done is closed when the replica has stopped running, by Stop or on its
// own.
func (r *Allocator) Done() <-chan struct{} { return r.done }

// AllocatorToken gets a token for the allocator's ServiceAccount, whose
// manifests are applied already.
func AllocatorToken(t testing.TB, admin kubernetes.Interface) string {
	t.Helper()
	tok, err := admin.CoreV1().ServiceAccounts(onnode.Namespace).CreateToken(context.Background(), manifests.AllocatorName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(7200))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// StartAllocator runs an allocator replica named id against api with the
// allocator ServiceAccount's token, stopped when the test ends.
func StartAllocator(t testing.TB, api *testapiserver.Server, token, id string) *Allocator {
	t.Helper()
	return StartAllocatorWith(t, api.TokenConfig(token), id, 0)
}

// StartAllocatorWith runs an allocator replica named id that reaches the
// API with cfg (through a proxy a test controls, say), each Service's
// sync bounded by syncTimeout (0: the allocator's default).
func StartAllocatorWith(t testing.TB, cfg *rest.Config, id string, syncTimeout time.Duration) *Allocator {
	t.Helper()
	buf := &LogBuffer{}
	reg := prometheus.NewRegistry()
	m := allocator.NewMetrics(reg)
	cfg = rest.CopyConfig(cfg)
	events := rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = allocatorQPS, allocatorBurst
	events.QPS, events.Burst = allocatorEventQPS, eventsBurst
	c, err := allocator.NewController(allocator.Options{
		Client:      kubernetes.NewForConfigOrDie(cfg),
		EventClient: kubernetes.NewForConfigOrDie(events),
		Dynamic:     dynamic.NewForConfigOrDie(events),
		ObjectProbe: 2 * time.Second,
		Namespace:   onnode.Namespace, Identity: id,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		SyncTimeout: syncTimeout,
		Log:         slog.New(slog.NewTextHandler(buf, nil)), Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Allocator{Controller: c, Metrics: m, Registry: reg, Log: buf, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = c.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			<-r.done
		})
		if t.Failed() {
			t.Logf("--- allocator %s log:\n%s", id, buf.Tail(30))
		}
	})
	return r
}
