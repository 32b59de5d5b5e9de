package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// StandIn is an in-process server listening inside a node's namespace.
type StandIn struct {
	srv   *httptest.Server
	ready atomic.Bool
	name  string
	// extra serve its further ports (ServeAPIStandIn's machine config
	// server).
	extra []*http.Server
}

// Close stops the server: its ports refuse connections from now on, and
// no socket of it holds its namespace any more.
func (s *StandIn) Close() {
	for _, srv := range s.extra {
		_ = srv.Close()
	}
	s.srv.Close()
}

// SetReady sets what its health endpoint answers (200 or 503).
func (s *StandIn) SetReady(ready bool) { s.ready.Store(ready) }

// serveHealth answers a health check: ok while ready, 503 after
// SetReady(false).
func (s *StandIn) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// ServeAPIStandIn serves HTTPS on addr at each port inside h like a
// kube-apiserver (and, on spec.api.internalPort, a machine config
// server): /readyz and /healthz for haproxy's checks, /livez always, / answers with name
// so a client can tell which backend it reached, /config/<pool> with an
// Ignition-like IgnitionStandIn as the machine config server would. SetReady switches every
// port's health at once.
func ServeAPIStandIn(t testing.TB, h *netlab.Host, addr, name string, ports ...int32) *StandIn {
	t.Helper()
	s := &StandIn{name: name}
	s.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", s.serveHealth)
	mux.HandleFunc("/healthz", s.serveHealth)
	// Alive as long as it serves, ready or not: as a kube-apiserver's
	// /livez?exclude=etcd while etcd has no leader.
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	mux.HandleFunc("/config/", func(w http.ResponseWriter, r *http.Request) { serveIgnition(w, r, name) })
	s.srv = httptest.NewUnstartedServer(mux)
	listeners := make([]net.Listener, len(ports))
	if err := h.Do(func() error {
		for i, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(int(p))))
			if err != nil {
				return err
			}
			listeners[i] = l
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = listeners[0]
	s.srv.StartTLS()
	for _, l := range listeners[1:] {
		// The certificate StartTLS made serves every port.
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second, TLSConfig: s.srv.TLS.Clone()}
		s.extra = append(s.extra, srv)
		go func() { _ = srv.ServeTLS(l, "", "") }()
	}
	t.Cleanup(s.Close)
	return s
}

// IgnitionStandIn is what a stand-in's /config/<pool> answers, shaped like
// the machine config server's Ignition: the spec version, and one file
// naming the pool asked for and the node that answered, so that a client
// can tell an Ignition from any other answer and see who served it.
type IgnitionStandIn struct {
	Ignition struct {
		Version string `json:"version"`
	} `json:"ignition"`
	Storage struct {
		Files []IgnitionFile `json:"files"`
	} `json:"storage"`
}

// IgnitionFile is one file of IgnitionStandIn.
type IgnitionFile struct {
	Path     string `json:"path"`
	Contents struct {
		Source string `json:"source"`
	} `json:"contents"`
}

// IgnitionVersion is the spec version IgnitionStandIn answers with.
const IgnitionVersion = "3.4.0"

// serveIgnition answers /config/<pool> with an IgnitionStandIn whose one
// file holds "data:,<pool>@<node>".
func serveIgnition(w http.ResponseWriter, r *http.Request, node string) {
	var ign IgnitionStandIn
	ign.Ignition.Version = IgnitionVersion
	f := IgnitionFile{Path: "/etc/vipctl-lab/served-by"}
	f.Contents.Source = "data:," + strings.TrimPrefix(r.URL.Path, "/config/") + "@" + node
	ign.Storage.Files = []IgnitionFile{f}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
	_ = json.NewEncoder(w).Encode(ign)
}

// StartRouter starts a router pod of one IngressController on the node:
// health on 0.0.0.0:healthPort (what keepalived's script asks) and traffic
// on vip:80, answered with "controller/node".
func (n *Node) StartRouter(t testing.TB, controller string, healthPort int32, vip string) *StandIn {
	t.Helper()
	s := &StandIn{name: n.Name}
	s.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", s.serveHealth)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintf(w, "%s/%s", controller, n.Name) })
	s.srv = httptest.NewUnstartedServer(mux)
	var health, traffic net.Listener
	if err := n.Host.Do(func() (err error) {
		if health, err = net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", healthPort)); err != nil {
			return err
		}
		traffic, err = net.Listen("tcp", net.JoinHostPort(vip, "80"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = health
	s.srv.Start()
	extra := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = extra.Serve(traffic) }()
	t.Cleanup(func() { _ = extra.Close(); s.Close() })
	n.Routers[controller] = s
	return s
}

// StartEcho serves HTTP on addr inside the node, answering with the
// node's name: the workload behind a service VIP.
func (n *Node) StartEcho(t testing.TB, addr string) {
	t.Helper()
	var l net.Listener
	if err := n.Host.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, n.Name) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}
