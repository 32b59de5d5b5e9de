package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/test/lab"
)

// TestAllocatorOutlivesAStuckStatusWrite: the allocator reaches the API
// through a proxy that never answers the first write of a Service's
// status (a connection whose far end died, an apiserver waiting for
// etcd). The one worker gives that sync up after its timeout and goes on:
// a Service created after it gets its address, and the stuck one gets
// its own on the retry.
func TestAllocatorOutlivesAStuckStatusWrite(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	e := startAllocEnv(t, clusterYAML("fast", "unicast", allocPools))
	target, err := url.Parse(e.api.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test apiserver's own certificate
	var stuck atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/services/stuck/status") && stuck.Add(1) == 1 {
			// Never answered: the client gives up. (The body read first:
			// only then does the server notice the client going away.)
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	// Closed after the allocator stops (cleanups run last first): Close
	// waits for the watches it proxies.
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, BearerToken: e.token}
	lab.StartAllocatorWith(t, cfg, "a-0", time.Second)

	e.service(t, "default", "stuck")
	lab.WaitFor(t, 30*time.Second, "the first status write of default/stuck sent", func() bool { return stuck.Load() > 0 })
	e.service(t, "default", "after")
	e.waitIPs(t, "default", "after", 1)
	e.waitIPs(t, "default", "stuck", 1)
	if n := stuck.Load(); n < 2 {
		t.Errorf("%d status writes of default/stuck, want the stuck one and a retry", n)
	}
}
