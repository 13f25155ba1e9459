package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/backup"
)

// TestSnapshotEndpoint: GET /v1/snapshot needs the admin token when one is
// set, and answers a backup file that verifies and counts the state.
func TestSnapshotEndpoint(t *testing.T) {
	const token = "s3cret-token"
	e := start(t, token)
	s := e.open("test", "peer", 0)
	e.hold(s, latch.LockRequest{Keys: []string{"a"}})
	e.hold(s, latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour})
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "guess", http.StatusUnauthorized},
		{"token", token, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := e.do(http.MethodGet, "/v1/snapshot", tt.token, nil)
			if status != tt.want {
				t.Fatalf("status %d, want %d; body %.200s", status, tt.want, body)
			}
			if status != http.StatusOK {
				return
			}
			meta, _, err := backup.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			if meta.Locks != 2 || meta.Leases != 1 || meta.Sessions != 1 || meta.Token == 0 || meta.Node == "" || meta.LatchVersion != "v0.0.0-test" {
				t.Errorf("meta %+v", meta)
			}
		})
	}
	c := admin.NewClient(e.base)
	if _, err := c.Snapshot(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("client without a token: %v", err)
	}
	file, err := c.Snapshot(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := backup.Parse(file); err != nil {
		t.Error(err)
	}
	if got := e.logLines("admin: snapshot"); len(got) != 2 {
		t.Errorf("%d snapshot log lines, want 2", len(got))
	}
}
