// Package tlstest makes throwaway certificates for tests: a CA, a server
// certificate for the loopback addresses, and a client certificate, all
// generated in memory when a test asks, so that no private key is ever
// committed.
package tlstest

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

// PKI is a test CA with one server and one client certificate, and the
// same as PEM files in a temporary directory.
type PKI struct {
	// CA is the certificate authority that signed Server and Client.
	CA *x509.Certificate
	// Server is valid for 127.0.0.1, ::1 and localhost.
	Server tls.Certificate
	// Client is a client certificate (CN "latch-test-client").
	Client tls.Certificate
	// Peer is both, as a cluster node's certificate is: valid for the
	// names Server is valid for, for server and client authentication.
	Peer tls.Certificate

	// Files, in PEM: the CA's certificate, the server's, the client's
	// and the peer's certificates and keys.
	CAFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile string
	PeerCertFile, PeerKeyFile                                            string

	caKey  *ecdsa.PrivateKey
	serial int64 // the last serial number issued
}

// New returns a new PKI whose files live in t.TempDir(). It fails t on any
// error.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		PeerCertFile:   filepath.Join(dir, "peer.pem"),
		PeerKeyFile:    filepath.Join(dir, "peer-key.pem"),
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "latch test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER := createCert(t, caTmpl, caTmpl, caKey, caKey)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.CA = ca
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)

	p.caKey, p.serial = caKey, 1
	p.Server = p.leaf(t, "localhost", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, true, p.ServerCertFile, p.ServerKeyFile)
	p.Client = p.leaf(t, "latch-test-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false, p.ClientCertFile, p.ClientKeyFile)
	p.Peer = p.leaf(t, "latch-test-peer", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true, p.PeerCertFile, p.PeerKeyFile)
	return p
}

// leaf issues a certificate signed by the CA, with the next serial
// number, and writes it and its key to certFile and keyFile.
func (p *PKI) leaf(t testing.TB, cn string, usage []x509.ExtKeyUsage, server bool, certFile, keyFile string) tls.Certificate {
	t.Helper()
	now := time.Now()
	p.serial++
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	if server {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der := createCert(t, tmpl, p.CA, key, p.caKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Reissue issues a new server certificate (and key) from the same CA,
// with a new serial number, writes it over ServerCertFile and
// ServerKeyFile, and returns it: a certificate rotated on disk. With peer,
// it does the same for the peer certificate (PeerCertFile, PeerKeyFile).
// The new certificate's leaf is parsed (Leaf is set).
func (p *PKI) Reissue(t testing.TB, peer bool) tls.Certificate {
	t.Helper()
	var cert tls.Certificate
	if peer {
		cert = p.leaf(t, "latch-test-peer", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true, p.PeerCertFile, p.PeerKeyFile)
		p.Peer = cert
	} else {
		cert = p.leaf(t, "localhost", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, true, p.ServerCertFile, p.ServerKeyFile)
		p.Server = cert
	}
	return cert
}

// Pool returns a certificate pool holding the CA.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	return pool
}

// ServerConfig returns a server configuration presenting the server
// certificate; with clientAuth, it requires a client certificate signed by
// the CA.
func (p *PKI) ServerConfig(clientAuth bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.Server}}
	if clientAuth {
		cfg.ClientCAs = p.Pool()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// ClientConfig returns a client configuration that trusts the CA; with
// withCert, it presents the client certificate.
func (p *PKI) ClientConfig(withCert bool) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.Pool()}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.Client}
	}
	return cfg
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func createCert(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
