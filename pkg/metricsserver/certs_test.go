package metricsserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeKeyPair writes a fresh self-signed certificate named name and its
// key into one PEM file, as the kubelet writes kubelet-server-current.pem,
// with the given modification time.
func writeKeyPair(t *testing.T, path, name string, mtime time.Time) {
	t.Helper()
	c, err := SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func servedName(t *testing.T, c *Certificates) string {
	t.Helper()
	cert, err := c.Get()
	if err != nil {
		t.Fatal(err)
	}
	return leaf(t, cert).Subject.CommonName
}

func leaf(t *testing.T, c *tls.Certificate) *x509.Certificate {
	t.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestCertificatesFollowTheFiles: the endpoint serves the file's
// certificate, a rotated file's from the next handshake on, keeps the
// last good one while the file is unreadable, and a self-signed one only
// when no file was ever readable.
func TestCertificatesFollowTheFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "kubelet-server-current.pem")

	c := NewCertificates(pemFile, pemFile, nil)
	if got := servedName(t, c); got != "vipctl-metrics" {
		t.Errorf("no file yet: served %q, want the self-signed vipctl-metrics", got)
	}

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeKeyPair(t, pemFile, "first", t0)
	if got := servedName(t, c); got != "first" {
		t.Errorf("file written: served %q, want first", got)
	}
	if got := servedName(t, c); got != "first" {
		t.Errorf("unchanged file: served %q, want first", got)
	}

	writeKeyPair(t, pemFile, "rotated", t0.Add(time.Hour))
	if got := servedName(t, c); got != "rotated" {
		t.Errorf("after rotation: served %q, want rotated", got)
	}

	if err := os.WriteFile(pemFile, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "rotated" {
		t.Errorf("unreadable file: served %q, want the last good (rotated)", got)
	}
	if err := os.Remove(pemFile); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "rotated" {
		t.Errorf("file gone: served %q, want the last good (rotated)", got)
	}
}

// TestSeparateKeyFile: a certificate and key in two files, as the service
// CA's Secret holds them (tls.crt, tls.key).
func TestSeparateKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := SelfSigned("allocator")
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, NewCertificates(crt, keyFile, nil)); got != "allocator" {
		t.Errorf("served %q, want allocator", got)
	}
}
