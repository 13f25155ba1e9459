package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// MinVersion is the oldest TLS version latch speaks.
const MinVersion = tls.VersionTLS12

// Server returns the configuration of a TLS server that presents the
// certificate in certFile (PEM, the leaf first, then any intermediates)
// with the private key in keyFile. When clientCAFile is not empty, every
// client must present a certificate that chains to one of the PEM
// certificates in it, or the handshake fails.
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: a server needs both a certificate and a key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: loading %s and %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{cert},
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client returns the configuration of a TLS client. caFile, when not
// empty, holds the PEM certificates that the server's certificate must
// chain to, instead of the system's roots. certFile and keyFile, both or
// neither, are the client's certificate, for servers that require one.
// serverName, when not empty, is the name the server's certificate must
// carry, instead of the host of the address dialed.
func Client(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: MinVersion, ServerName: serverName}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: loading %s and %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("tls: a client certificate needs both the certificate and its key")
	}
	return cfg, nil
}

// loadPool reads the PEM certificates of path into a new pool.
func loadPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("tls: %s holds no PEM certificate", path)
	}
	return pool, nil
}
