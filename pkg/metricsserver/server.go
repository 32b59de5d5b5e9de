// Package metricsserver serves a component's /metrics to the cluster's
// Prometheus the way OpenShift's host-network components do: over TLS,
// and only to a scraper the API server vouches for. The scraper's bearer
// token is checked with a TokenReview and its right to `get` the
// non-resource URL /metrics with a SubjectAccessReview, the answers kept
// as k8s.io/apiserver's delegating authenticator and authorizer keep
// them (the code kube-rbac-proxy and controller-runtime's metrics filter
// use; not linked, see reviewer), with the component's own credentials: the node's for the sidecar (the Node
// authorizer grants every node tokenreviews and subjectaccessreviews, as
// the kubelet needs them for its own API), the allocator's ServiceAccount
// for the allocator (granted in its ClusterRole).
//
// Health probes are not served here: they stay on localhost (the sidecar)
// or on the pod's plain port (the allocator), where the kubelet asks
// without credentials.
package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
)

// Path is the one URL served, and the non-resource URL a scraper must be
// allowed to get (ClusterRole rule `nonResourceURLs: ["/metrics"]`).
const Path = "/metrics"

// How long the answers of the API server are reused. A token stays valid
// for its lifetime, so two minutes cost nothing; a denial is kept short,
// so granting the RBAC takes effect within a scrape or two.
const (
	tokenCacheTTL = 2 * time.Minute
	allowCacheTTL = 2 * time.Minute
	denyCacheTTL  = 10 * time.Second
	reviewTimeout = 10 * time.Second
)

// Options configure Start.
type Options struct {
	// Addr is where to listen (":9449"); ignored when Listener is set.
	Addr string
	// Listener, when set, is served instead of listening on Addr (the lab
	// opens it inside a node's network namespace).
	Listener net.Listener
	// Gatherer is what /metrics exposes.
	Gatherer prometheus.Gatherer
	// Client makes the TokenReviews and SubjectAccessReviews, with the
	// component's own identity.
	Client kubernetes.Interface
	// CertFile and KeyFile are the serving certificate and key, PEM (one
	// file may hold both, as the kubelet's rotated certificate does).
	// They are read again when they change; while they cannot be read,
	// a self-signed certificate serves (see Certificates).
	CertFile, KeyFile string
	Log               *slog.Logger
}

// Server is a running metrics endpoint.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	review *reviewer
	log    *slog.Logger
	h      http.Handler
}

// New builds the server without listening (Start listens and serves).
func New(o Options) (*Server, error) {
	if o.Client == nil {
		return nil, errors.New("metrics server: no API client for TokenReview and SubjectAccessReview")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Server{review: newReviewer(o.Client), log: o.Log, ln: o.Listener,
		h: promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})}
	certs := NewCertificates(o.CertFile, o.KeyFile, o.Log)
	s.srv = &http.Server{
		Addr:              o.Addr,
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         certs.TLSConfig(),
		// The HTTP server's own complaints (TLS handshakes of port
		// scanners) are not worth a line each in the sidecar's log.
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Start listens (unless Options.Listener is set) and serves until Close.
func Start(o Options) (*Server, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	if s.ln == nil {
		if s.ln, err = net.Listen("tcp", o.Addr); err != nil {
			return nil, fmt.Errorf("metrics server: %w", err)
		}
	}
	go func() {
		if err := s.srv.ServeTLS(s.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address listened on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }

// ServeHTTP answers GET /metrics to an authorized scraper: 401 without a
// token the API server accepts, 403 for one whose user may not get
// /metrics, 503 when the API server could not be asked.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	user, ok, err := s.review.authenticate(r.Context(), bearerToken(r))
	if err != nil || !ok {
		if err != nil {
			s.log.Debug("metrics scrape not authenticated", "remote", r.RemoteAddr, "err", err)
		}
		http.Error(w, "Unauthorized: a bearer token the API server accepts is required", http.StatusUnauthorized)
		return
	}
	allowed, reason, err := s.review.authorize(r.Context(), user)
	switch {
	case allowed:
		s.h.ServeHTTP(w, r)
	case err != nil && !errors.Is(err, context.Canceled):
		s.log.Warn("metrics scrape: SubjectAccessReview failed", "user", user.Username, "err", err)
		http.Error(w, "authorization could not be checked", http.StatusServiceUnavailable)
	default:
		s.log.Debug("metrics scrape forbidden", "user", user.Username, "reason", reason)
		http.Error(w, fmt.Sprintf("Forbidden: user %q may not get %s", user.Username, Path), http.StatusForbidden)
	}
}
