package metricsserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"time"
)

// Certificates serve the metrics endpoint's TLS: the certificate and key
// in the files named, read again whenever either file changes (the
// kubelet rotates its serving certificate by pointing
// kubelet-server-current.pem at a new file; the service CA rewrites its
// Secret), checked on each handshake by the files' size and time.
//
// While the files cannot be read (a kubelet without serving certificate
// rotation, a cluster without OpenShift's service CA) a self-signed
// certificate made at start serves instead, and the scrape configuration
// has to skip verification (the rendered objects for a plain
// prometheus-operator do, as kube-prometheus does for the kubelet). The
// scraper's authorization does not depend on it either way.
type Certificates struct {
	certFile, keyFile string
	log               *slog.Logger

	mu sync.Mutex
	// stamp is the files' sizes and times when current was read.
	stamp   string
	current *tls.Certificate
	lastErr string

	selfOnce sync.Once
	self     *tls.Certificate
	selfErr  error
}

// NewCertificates reads certFile and keyFile on each handshake that finds
// them changed.
func NewCertificates(certFile, keyFile string, log *slog.Logger) *Certificates {
	if log == nil {
		log = slog.Default()
	}
	return &Certificates{certFile: certFile, keyFile: keyFile, log: log}
}

// TLSConfig serves Get's certificate, TLS 1.2 at least.
func (c *Certificates) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.Get() },
	}
}

// Get is the certificate to serve now.
func (c *Certificates) Get() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp, err := c.fileStamp()
	if err == nil && stamp == c.stamp {
		return c.current, nil
	}
	if err == nil {
		cert, lerr := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if lerr == nil {
			c.log.Info("metrics endpoint serves the certificate from file", "cert", c.certFile)
			c.current, c.stamp, c.lastErr = &cert, stamp, ""
			return c.current, nil
		}
		err = lerr
	}
	if c.current != nil {
		// A rotation caught half-written: keep what served until now.
		return c.current, nil
	}
	if msg := err.Error(); msg != c.lastErr {
		c.lastErr = msg
		c.log.Warn("metrics endpoint serves a self-signed certificate: scrapers must skip verification", "err", err)
	}
	return c.selfSigned()
}

// fileStamp says whether the files changed: their sizes and times.
func (c *Certificates) fileStamp() (string, error) {
	if c.certFile == "" || c.keyFile == "" {
		return "", fmt.Errorf("no certificate file configured")
	}
	s := ""
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

func (c *Certificates) selfSigned() (*tls.Certificate, error) {
	c.selfOnce.Do(func() { c.self, c.selfErr = SelfSigned("vipctl-metrics") })
	return c.self, c.selfErr
}

// SelfSigned makes a certificate and key for name, valid for a year.
func SelfSigned(name string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
