package testapiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// CA signs certificates for a test: the apiserver's client certificates,
// and serving certificates as a cluster's kubelet-serving CA signs the
// ones the sidecars serve their metrics with. Valid for a day.
type CA struct {
	cert    *x509.Certificate
	certDER []byte
	key     *ecdsa.PrivateKey
}

// NewCA makes a CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, certDER: der, key: key}
}

// Pool trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// CertPEM is the CA's certificate, for a client's CA file.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.certDER})
}

// IssueClient is a client certificate for user in groups, and its key.
func (ca *CA) IssueClient(t testing.TB, user string, groups []string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issue(t, x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// IssueServing writes a serving certificate for the given IP addresses
// and its key into one PEM file at path, the form of the kubelet's
// kubelet-server-current.pem.
func (ca *CA) IssueServing(t testing.TB, path string, ips ...string) {
	t.Helper()
	tmpl := x509.Certificate{Subject: pkix.Name{CommonName: "system:node:lab"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	certPEM, keyPEM := ca.issue(t, tmpl)
	if err := os.WriteFile(path, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue signs tmpl (its subject, usages and addresses) with a new key,
// valid for a day.
func (ca *CA) issue(t testing.TB, tmpl x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// ServerCert is a serving certificate for the addresses and names, and
// its key.
func (ca *CA) ServerCert(t testing.TB, cn string, ips []net.IP, names []string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issue(t, x509.Certificate{Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: ips, DNSNames: names})
}
