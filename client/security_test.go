package client

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// TestDialTLS dials a server that requires client certificates.
func TestDialTLS(t *testing.T) {
	pki := tlstest.New(t)
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr, cfg.Admin.Addr, cfg.DLock.Addr = "", "", "127.0.0.1:0"
	cfg.Redis.Addr = ""
	cfg.TLS = config.TLSConfig{Cert: pki.ServerCertFile, Key: pki.ServerKeyFile, ClientCA: pki.CAFile}
	srv, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	addr := srv.DLockAddr().String()

	tests := []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"TLS with a client certificate", []Option{TLS(pki.ClientConfig(true))}, true},
		{"plaintext", nil, false},
		{"TLS without a client certificate", []Option{TLS(pki.ClientConfig(false))}, false},
		{"TLS not trusting the CA", []Option{TLS(&tls.Config{Certificates: []tls.Certificate{pki.Client}})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append([]Option{DialTimeout(10 * time.Second)}, tt.opts...)
			c, err := Dial(t.Context(), addr, opts...)
			if !tt.ok {
				if err == nil {
					c.Close()
					t.Fatal("Dial() error = nil, want a failure")
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial() error = %v", err)
			}
			defer c.Close()
			l, err := c.Lock(t.Context(), []string{"k"})
			if err != nil {
				t.Fatalf("Lock() over TLS: %v", err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Errorf("Unlock() = %v", err)
			}
		})
	}
}

// TestTokenScopes: a token for jobs/ locks jobs/ keys only; a read-only
// token opens a session but locks nothing.
func TestTokenScopes(t *testing.T) {
	s := startServer(t, 0, "jobs lock jobs/", "mon read")
	jobs, err := Dial(t.Context(), s.addr, AccessToken("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()
	l, err := jobs.Lock(t.Context(), []string{"jobs/nightly"})
	if err != nil {
		t.Fatalf("Lock(jobs/nightly) with the jobs token: %v", err)
	}
	defer l.Unlock(context.Background())
	if _, err := jobs.TryLock(t.Context(), []string{"deploy/web"}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("TryLock(deploy/web) with the jobs token: %v, want ErrUnauthorized", err)
	}

	mon, err := Dial(t.Context(), s.addr, AccessToken("mon"))
	if err != nil {
		t.Fatalf("Dial() with a read-only token: %v", err)
	}
	defer mon.Close()
	if _, err := mon.TryLock(t.Context(), []string{"jobs/other"}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("TryLock() with a read-only token: %v, want ErrUnauthorized", err)
	}

	if c, err := Dial(t.Context(), s.addr, AccessToken("guess")); !errors.Is(err, ErrUnauthorized) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial() with a bad token: %v, want ErrUnauthorized", err)
	}
}
