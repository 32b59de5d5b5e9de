package netlab

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// ServeText answers body over HTTP on addr inside h until the test ends or
// the returned stop is called.
func (h *Host) ServeText(t testing.TB, addr, body string) (stop func()) {
	t.Helper()
	var l net.Listener
	if err := h.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return func() { _ = srv.Close() }
}

// Get asks url from inside h with a new connection: the body, or
// "refused" when the connection was refused (ECONNREFUSED), or the error.
func (h *Host) Get(url string) string {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: h.DialContext, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "refused"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
