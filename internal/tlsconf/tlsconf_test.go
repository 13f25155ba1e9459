package tlsconf_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/tlsconf"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

func TestServer(t *testing.T) {
	pki := tlstest.New(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		cert, key, ca  string
		wantClientAuth tls.ClientAuthType
		err            string
	}{
		{name: "certificate", cert: pki.ServerCertFile, key: pki.ServerKeyFile, wantClientAuth: tls.NoClientCert},
		{name: "client CA", cert: pki.ServerCertFile, key: pki.ServerKeyFile, ca: pki.CAFile, wantClientAuth: tls.RequireAndVerifyClientCert},
		{name: "no key", cert: pki.ServerCertFile, err: "both"},
		{name: "wrong key", cert: pki.ServerCertFile, key: pki.ClientKeyFile, err: "loading"},
		{name: "missing CA", cert: pki.ServerCertFile, key: pki.ServerKeyFile, ca: missing, err: "missing.pem"},
		{name: "empty CA", cert: pki.ServerCertFile, key: pki.ServerKeyFile, ca: empty, err: "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tlsconf.Server(tt.cert, tt.key, tt.ca)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Server() error = %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MinVersion != tls.VersionTLS12 || len(cfg.Certificates) != 1 || cfg.ClientAuth != tt.wantClientAuth {
				t.Errorf("Server() = min version %x, %d certificates, client auth %v; want TLS 1.2, 1, %v",
					cfg.MinVersion, len(cfg.Certificates), cfg.ClientAuth, tt.wantClientAuth)
			}
		})
	}
}

func TestClient(t *testing.T) {
	pki := tlstest.New(t)
	cfg, err := tlsconf.Client(pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "localhost" || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("Client() = %+v", cfg)
	}
	if cfg, err := tlsconf.Client("", "", "", ""); err != nil || cfg.RootCAs != nil {
		t.Errorf("Client() with nothing = %+v, %v; want the system roots", cfg, err)
	}
	if _, err := tlsconf.Client("", "", pki.ClientKeyFile, ""); err == nil {
		t.Error("Client() with a key and no certificate: error = nil")
	}
}

// TestHandshake: a server and a client built from the same files agree,
// client certificate included.
func TestHandshake(t *testing.T) {
	pki := tlstest.New(t)
	srvCfg, err := tlsconf.Server(pki.ServerCertFile, pki.ServerKeyFile, pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := tlsconf.Client(pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer nc.Close()
		done <- nc.(*tls.Conn).Handshake()
	}()
	nc, err := tls.Dial("tcp", ln.Addr().String(), cliCfg)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := <-done; err != nil {
		t.Errorf("server handshake: %v", err)
	}
}
