package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files of a test CA, a server certificate it signed for
// 127.0.0.1 and the DNS name ServerName, and a client certificate it
// signed, with their keys.
type Certs struct {
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string
	// ServerName is the DNS name in the server certificate.
	ServerName string
	pool       *x509.CertPool
	client     tls.Certificate
}

// NewCerts makes a CA and the certificates it signs in a directory of t.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{ServerName: "redis.kvgen.test"}
	caKey, caCert, caDER := newCert(t, "kvgen test CA", nil, nil, func(tmpl *x509.Certificate) {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	})
	c.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	c.pool = x509.NewCertPool()
	c.pool.AddCert(caCert)

	srvKey, _, srvDER := newCert(t, "redis", caCert, caKey, func(tmpl *x509.Certificate) {
		tmpl.DNSNames = []string{c.ServerName}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	c.ServerCertFile = writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	c.ServerKeyFile = writePEM(t, dir, "server-key.pem", "PRIVATE KEY", marshalKey(t, srvKey))

	cliKey, _, cliDER := newCert(t, "kvgen client", caCert, caKey, func(tmpl *x509.Certificate) {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	c.ClientCertFile = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	c.ClientKeyFile = writePEM(t, dir, "client-key.pem", "PRIVATE KEY", marshalKey(t, cliKey))
	cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c.client = cert
	return c
}

// ClientConfig is a TLS configuration that trusts the CA and presents the
// client certificate.
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{c.client}, MinVersion: tls.VersionTLS12}
}

// StartTLS starts a redis-server that speaks only TLS, with the server
// certificate of certs, and asks clients for a certificate signed by its CA.
func StartTLS(t testing.TB, certs *Certs) *Server {
	t.Helper()
	return StartWith(t, Options{
		Args: []string{
			"--tls-cert-file", certs.ServerCertFile,
			"--tls-key-file", certs.ServerKeyFile,
			"--tls-ca-cert-file", certs.CAFile,
			"--tls-auth-clients", "yes",
		},
		TLS: certs.ClientConfig(),
	})
}

// newCert makes a key and a certificate for it, signed by parent (self-
// signed when parent is nil).
func newCert(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, edit func(*x509.Certificate)) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
