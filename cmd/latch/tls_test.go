//go:build unix

package main

import (
	"context"
	"testing"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// TestClientTLSFlags runs "latch run" and "latch status" in process against
// a server that requires client certificates.
func TestClientTLSFlags(t *testing.T) {
	pki := tlstest.New(t)
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr = ""
	cfg.DLock.Addr = "127.0.0.1:0"
	cfg.Redis.Addr = ""
	cfg.Admin.Addr = "127.0.0.1:0"
	cfg.TLS = config.TLSConfig{Cert: pki.ServerCertFile, Key: pki.ServerKeyFile, ClientCA: pki.CAFile}
	srv, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	dlockAddr, adminAddr := srv.DLockAddr().String(), srv.AdminAddr().String()
	tlsArgs := []string{"--tls-ca", pki.CAFile, "--tls-cert", pki.ClientCertFile, "--tls-key", pki.ClientKeyFile}
	with := func(args ...string) []string {
		return append(append(args[:1:1], tlsArgs...), args[1:]...)
	}

	tests := []cliCase{
		{name: "run", args: with("run", "--addr", dlockAddr, "k", "--", "sh", "-c", "echo held $LATCH_KEYS"), wantStdout: "held k"},
		{name: "run with server name", args: with("run", "--addr", dlockAddr, "--tls-server-name", "localhost", "k", "--", "true")},
		{name: "run with a wrong server name", args: with("run", "--addr", dlockAddr, "--tls-server-name", "example.org", "k", "--", "true"), wantCode: 125, wantStderr: "certificate"},
		{name: "run without TLS", args: []string{"run", "--addr", dlockAddr, "k", "--", "true"}, wantCode: 125, wantStderr: "latch run:"},
		{name: "run without a client certificate", args: []string{"run", "--tls-ca", pki.CAFile, "--addr", dlockAddr, "k", "--", "true"}, wantCode: 125, wantStderr: "latch run:"},
		{name: "run with a certificate and no key", args: []string{"run", "--tls-cert", pki.ClientCertFile, "k", "--", "true"}, wantCode: 2, wantStderr: "needs both"},
		{name: "status", args: with("status", "--admin-addr", adminAddr), wantStdout: "LOCKS"},
		{name: "status without TLS", args: []string{"status", "--admin-addr", adminAddr}, wantCode: 1, wantStderr: "latch status:"},
		{name: "status with a missing CA file", args: []string{"status", "--tls-ca", t.TempDir() + "/none.pem"}, wantCode: 2, wantStderr: "none.pem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}
