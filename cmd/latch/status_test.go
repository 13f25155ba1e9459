package main

import (
	"context"
	"testing"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// TestStatus runs "latch status" in process against an in-process server.
func TestStatus(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr = ""
	cfg.DLock.Addr = ""
	cfg.Redis.Addr = ""
	cfg.Admin.Addr = "127.0.0.1:0"
	srv, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	sess, err := srv.Service().OpenSession(latch.SessionOptions{Protocol: "dlock", Peer: "192.0.2.7:999"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{"backup/db"}}); err != nil {
		t.Fatal(err)
	}
	addr := srv.AdminAddr().String()

	tests := []cliCase{
		{name: "flag", args: []string{"status", "--admin-addr", addr}, wantStdout: "backup/db  held"},
		{name: "env", args: []string{"status"}, env: map[string]string{"LATCH_ADMIN_ADDR": addr}, wantStdout: "192.0.2.7:999"},
		{name: "json", args: []string{"status", "--admin-addr", addr, "--json"}, wantStdout: `"key": "backup/db"`},
		{name: "prefix", args: []string{"status", "--admin-addr", addr, "--prefix", "nope/"}, wantStdout: "LOCKS: 0 keys"},
		{name: "unreachable", args: []string{"status", "--admin-addr", "127.0.0.1:1"}, wantCode: 1, wantStderr: "latch status:"},
		{name: "bad interval", args: []string{"status", "--watch", "--interval", "0s"}, wantCode: 2, wantStderr: "--interval"},
		{name: "extra argument", args: []string{"status", "now"}, wantCode: 2, wantStderr: "unexpected arguments"},
		{name: "help", args: []string{"help", "status"}, wantStderr: "LATCH_ADMIN_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}
