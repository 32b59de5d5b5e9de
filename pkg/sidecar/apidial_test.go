package sidecar

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/cluster"
)

// TestAPIFallbackReachesAControlPlaneNode: the kubeconfig's address (the
// API VIP) does not answer; the request goes to a control-plane node's
// kube-apiserver at the same port instead, and TLS still verifies the
// name the kubeconfig uses.
func TestAPIFallbackReachesAControlPlaneNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "master-1") }))
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// 127.0.0.1 stands for the VIP: nothing listens there at that port.
	cfg := &rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(port), TLSClientConfig: rest.TLSClientConfig{CAData: certPEM(t, srv)}}
	nodes := []cluster.Node{
		{Name: "worker-0", Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.3")}},
		{Name: "master-1", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.2")}},
	}
	WithAPIFallback(cfg, nodes, "worker-0")
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + "/")
	if err != nil {
		t.Fatalf("through the fallback: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if body, _ := io.ReadAll(resp.Body); string(body) != "master-1" {
		t.Errorf("answered %q, want master-1", body)
	}
}

// TestAPIFallbacksOrder: this node's own kube-apiserver first on a
// control-plane node, then the other control-plane nodes; workers never.
func TestAPIFallbacksOrder(t *testing.T) {
	n := func(name string, cp bool, addr string) cluster.Node {
		return cluster.Node{Name: name, ControlPlane: cp, Addresses: []netip.Addr{netip.MustParseAddr(addr)}}
	}
	nodes := []cluster.Node{n("master-0", true, "198.51.100.11"), n("master-1", true, "198.51.100.12"), n("worker-0", false, "198.51.100.21"), n("master-2", true, "2001:db8::13")}
	for self, want := range map[string][]string{
		"master-1": {"198.51.100.12:6443", "198.51.100.11:6443", "[2001:db8::13]:6443"},
		"worker-0": {"198.51.100.11:6443", "198.51.100.12:6443", "[2001:db8::13]:6443"},
	} {
		if got := APIFallbacks(nodes, self, 6443); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", self, got, want)
		}
	}
	cfg := &rest.Config{Host: "https://api-int.lab.example.test:6443"}
	WithAPIFallback(cfg, []cluster.Node{n("worker-0", false, "198.51.100.21")}, "worker-0")
	if cfg.Dial != nil {
		t.Errorf("no control-plane node known, yet the dialer was replaced")
	}
}

func certPEM(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
