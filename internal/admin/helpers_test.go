package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/node"
)

// logLines returns the JSON log lines of e's server whose msg is msg.
func (e *env) logLines(msg string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for line := range strings.Lines(e.logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			e.t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// env is a running latch server, or an admin server alone, and a client
// for its admin HTTP server.
type env struct {
	t    *testing.T
	srv  *latchtest.Server // nil for an admin server alone
	svc  latch.Service
	base string // http://127.0.0.1:port
	logs *latchtest.SyncBuffer
	// admin is the admin server alone (newTestAdminWith); nil otherwise.
	admin *admin.Server
}

// start starts a whole server whose admin actions require token ("" for
// none).
func start(t *testing.T, token string) *env {
	t.Helper()
	srv := latchtest.Start(t, func(c *config.Config) {
		c.Admin.Token = token
		c.Server.Version = "v0.0.0-test"
	})
	return &env{t: t, srv: srv, svc: srv.Service(), base: "http://" + srv.Admin, logs: srv.Logs}
}

// open opens a session that the test closes at its end.
func (e *env) open(protocol, peer string, ttl time.Duration) latch.Session {
	e.t.Helper()
	s, err := e.svc.OpenSession(latch.SessionOptions{Protocol: protocol, Peer: peer, TTL: ttl})
	if err != nil {
		e.t.Fatalf("OpenSession() error = %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// hold acquires req at once or fails the test.
func (e *env) hold(s latch.Session, req latch.LockRequest) latch.Grant {
	e.t.Helper()
	g, err := s.Acquire(context.Background(), req)
	if err != nil {
		e.t.Fatalf("session %d: Acquire(%q) error = %v", s.ID(), req.Keys, err)
	}
	return g
}

// park starts s waiting forever for an exclusive lock on key and returns
// once the request is queued. The channel receives Acquire's error.
func (e *env) park(s latch.Session, key string) <-chan error {
	e.t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}, Wait: latch.WaitForever})
		done <- err
	}()
	e.eventually("session to queue for "+key, func() bool {
		ki, _ := e.svc.Lock(key)
		for _, w := range ki.Waiters {
			if w.Session == s.ID() {
				return true
			}
		}
		return false
	})
	return done
}

// eventually polls cond until it holds, failing the test after a generous
// bound (it never measures speed).
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// do sends a request and returns the status and body.
func (e *env) do(method, path, token string, form url.Values, header ...string) (int, []byte) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// getJSON GETs path, expects status want, and decodes the body into v.
func (e *env) getJSON(path string, want int, v any) {
	e.t.Helper()
	status, body := e.do(http.MethodGet, path, "", nil)
	if status != want {
		e.t.Fatalf("GET %s: status %d, want %d; body %s", path, status, want, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		e.t.Fatalf("GET %s: %v; body %s", path, err, body)
	}
}

// newTestAdmin runs an admin.Server alone over a node, with ready as its
// readiness.
func newTestAdmin(t *testing.T, ready func() error) *env {
	t.Helper()
	return newTestAdminWith(t, func(c *admin.Config) { c.Ready = ready })
}

// newTestAdminWith runs an admin.Server alone over a node, with the
// configuration that set makes of the default one.
func newTestAdminWith(t *testing.T, set func(*admin.Config)) *env {
	t.Helper()
	m := metrics.New()
	n, err := node.New(node.Config{Observer: m.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(n)
	cfg := admin.Config{Addr: "127.0.0.1:0", Service: n, Metrics: m}
	set(&cfg)
	a, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Shutdown(context.Background())
		if err := a.Shutdown(context.Background()); err != nil {
			t.Errorf("admin Shutdown() error = %v", err)
		}
	})
	return &env{t: t, svc: n, base: "http://" + a.Addr().String(), logs: new(latchtest.SyncBuffer), admin: a}
}
