package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/latchd/latch/internal/admin"
)

// TestSetTokenAndReload: POST /v1/reload is an admin action that runs
// Config.Reload and answers its report; SetToken's token is the one the
// next action needs, "" none.
func TestSetTokenAndReload(t *testing.T) {
	var a *admin.Server
	calls := 0
	e := newTestAdminWith(t, func(c *admin.Config) {
		c.Token = "old"
		c.Reload = func() admin.Reloaded {
			calls++
			a.SetToken("new") // as a reload of the admin token does
			return admin.Reloaded{OK: true, Changed: []string{"admin-token"}, Kept: []string{}, Restart: []string{}}
		}
	})
	a = e.admin
	for _, tt := range []struct {
		token  string
		status int
		calls  int
	}{
		{"", http.StatusUnauthorized, 0},
		{"new", http.StatusUnauthorized, 0},
		{"old", http.StatusOK, 1},
		{"old", http.StatusUnauthorized, 1}, // the reload set "new"
		{"new", http.StatusOK, 2},
	} {
		status, body := e.do(http.MethodPost, "/v1/reload", tt.token, nil)
		if status != tt.status || calls != tt.calls {
			t.Fatalf("POST /v1/reload with %q: %d (%d reloads), want %d (%d); %s", tt.token, status, calls, tt.status, tt.calls, body)
		}
		if status == http.StatusOK {
			var r admin.Reloaded
			if err := json.Unmarshal(body, &r); err != nil || !r.OK || len(r.Changed) != 1 {
				t.Errorf("answer %s (%v), want the report", body, err)
			}
		}
	}
	a.SetToken("")
	if status, _ := e.do(http.MethodPost, "/v1/reload", "", nil); status != http.StatusOK {
		t.Errorf("with no token in force: %d, want 200", status)
	}

	none := newTestAdminWith(t, func(*admin.Config) {})
	if status, _ := none.do(http.MethodPost, "/v1/reload", "", nil); status != http.StatusNotImplemented {
		t.Errorf("without Config.Reload: %d, want 501", status)
	}
}
