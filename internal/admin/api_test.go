package admin_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
)

// rfc3339Nano matches the API's times: UTC, nine fractional digits.
var rfc3339Nano = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`)

// table sets up a lock table with every kind of entry:
//
//	app/a   exclusive, held by s1 (memcache), waited for by s2 then s3
//	app/b   shared (limit 3), held by s2 and by s3 with a lease
//	other/x exclusive, held by s3
type table struct {
	s1, s2, s3 latch.Session
	tokA       latch.Token
	w2, w3     <-chan error
}

func setup(e *env) *table {
	e.t.Helper()
	tb := &table{
		s1: e.open("memcache", "10.0.0.1:5001", 0),
		s2: e.open("dlock", "10.0.0.2:5002", time.Hour),
		s3: e.open("dlock", "10.0.0.3:5003", 0),
	}
	tb.tokA = e.hold(tb.s1, latch.LockRequest{Keys: []string{"app/a"}}).Token
	e.hold(tb.s2, latch.LockRequest{Keys: []string{"app/b"}, Mode: latch.Shared, Limit: 3})
	e.hold(tb.s3, latch.LockRequest{Keys: []string{"app/b"}, Mode: latch.Shared, Limit: 3, Lease: time.Hour})
	e.hold(tb.s3, latch.LockRequest{Keys: []string{"other/x"}})
	tb.w2 = e.park(tb.s2, "app/a")
	tb.w3 = e.park(tb.s3, "app/a")
	return tb
}

func TestLocks(t *testing.T) {
	e := start(t, "")
	tb := setup(e)

	// Raw JSON first: field names and formats are the API.
	status, body := e.do(http.MethodGet, "/v1/locks", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/locks: %d %s", status, body)
	}
	var raw struct {
		Locks []map[string]any `json:"locks"`
		Next  *string          `json:"next"`
		Time  string           `json:"time"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Next != nil {
		t.Errorf("next = %q on the only page", *raw.Next)
	}
	if !rfc3339Nano.MatchString(raw.Time) {
		t.Errorf("time = %q, want RFC 3339 with nanoseconds", raw.Time)
	}
	var keys []string
	for _, l := range raw.Locks {
		keys = append(keys, l["key"].(string))
	}
	if want := []string{"app/a", "app/b", "other/x"}; !slices.Equal(keys, want) {
		t.Fatalf("keys = %q, want %q", keys, want)
	}
	a := raw.Locks[0]
	h := a["holders"].([]any)[0].(map[string]any)
	for field, want := range map[string]any{
		"session": float64(tb.s1.ID()), "protocol": "memcache", "peer": "10.0.0.1:5001",
		"token": strconv.FormatUint(uint64(tb.tokA), 10),
	} {
		if h[field] != want {
			t.Errorf("app/a holder %s = %v (%T), want %v", field, h[field], h[field], want)
		}
	}
	if s, _ := h["acquired_at"].(string); !rfc3339Nano.MatchString(s) {
		t.Errorf("acquired_at = %v", h["acquired_at"])
	}
	if _, ok := h["lease_expires_at"]; ok {
		t.Error("lease_expires_at present on a lock without a lease")
	}
	if a["mode"] != "exclusive" {
		t.Errorf("app/a mode = %v", a["mode"])
	}

	// Then typed.
	var list admin.LockList
	e.getJSON("/v1/locks", http.StatusOK, &list)
	la := list.Locks[0]
	var ws []uint64
	for i, w := range la.Waiters {
		ws = append(ws, w.Session)
		if w.Position != i || w.Mode != "exclusive" || w.Protocol != "dlock" || w.WaitingSince.IsZero() || w.WaitedSeconds < 0 || !w.Deadline.IsZero() || w.Keys != 1 {
			t.Errorf("app/a waiter %d = %+v", i, w)
		}
	}
	if want := []uint64{uint64(tb.s2.ID()), uint64(tb.s3.ID())}; !slices.Equal(ws, want) {
		t.Errorf("app/a waiters = %v, want %v in queue order", ws, want)
	}
	lb := list.Locks[1]
	if lb.Mode != "shared" || lb.Limit != 3 || len(lb.Holders) != 2 || len(lb.Waiters) != 0 {
		t.Fatalf("app/b = %+v", lb)
	}
	if lb.Holders[0].LeaseExpiresAt.IsZero() == lb.Holders[1].LeaseExpiresAt.IsZero() {
		t.Errorf("app/b holders = %+v, want exactly one with a lease", lb.Holders)
	}
	_ = tb
}

func TestLocksPagination(t *testing.T) {
	e := start(t, "")
	setup(e)
	tests := []struct {
		name  string
		query string
		pages [][]string // keys of each page
	}{
		{"one page", "", [][]string{{"app/a", "app/b", "other/x"}}},
		{"limit 1", "limit=1", [][]string{{"app/a"}, {"app/b"}, {"other/x"}}},
		{"limit 2", "limit=2", [][]string{{"app/a", "app/b"}, {"other/x"}}},
		{"exact fit", "limit=3", [][]string{{"app/a", "app/b", "other/x"}}},
		{"prefix", "prefix=app/", [][]string{{"app/a", "app/b"}}},
		{"prefix paged", "prefix=app/&limit=1", [][]string{{"app/a"}, {"app/b"}}},
		{"prefix none", "prefix=zzz", [][]string{{}}},
		{"after", "after=app/a", [][]string{{"app/b", "other/x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := ""
			for i, want := range tt.pages {
				q, _ := url.ParseQuery(tt.query)
				if after != "" {
					q.Set("after", after)
				}
				var page admin.LockList
				e.getJSON("/v1/locks?"+q.Encode(), http.StatusOK, &page)
				var got []string
				for _, l := range page.Locks {
					got = append(got, l.Key)
				}
				if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("page %d = %q, want %q", i, got, want)
				}
				last := i == len(tt.pages)-1
				if last != (page.Next == "") {
					t.Fatalf("page %d: next = %q, want a cursor on every page but the last", i, page.Next)
				}
				after = page.Next
			}
		})
	}
	for _, bad := range []string{"limit=0", "limit=-1", "limit=many"} {
		var e1 admin.Error
		e.getJSON("/v1/locks?"+bad, http.StatusBadRequest, &e1)
		if !strings.Contains(e1.Error, "limit") {
			t.Errorf("%s: error %q", bad, e1.Error)
		}
	}
}

func TestLock(t *testing.T) {
	e := start(t, "")
	tb := setup(e)
	s := e.open("memcache", "", 0)
	odd := []string{"odd?key#%/x", "dots/../x//y/.", "/lead"}
	e.hold(s, latch.LockRequest{Keys: odd})
	for _, path := range []string{
		"/v1/locks/app/a",
		"/v1/locks/app%2Fa",
		"/v1/locks/" + url.PathEscape("app/a"),
	} {
		var l admin.Lock
		e.getJSON(path, http.StatusOK, &l)
		if l.Key != "app/a" || len(l.Holders) != 1 || l.Holders[0].Session != uint64(tb.s1.ID()) || len(l.Waiters) != 2 {
			t.Errorf("GET %s = %+v", path, l)
		}
	}
	// Keys that are not clean paths work escaped, as clients send them.
	for _, k := range odd {
		var l admin.Lock
		e.getJSON("/v1/locks/"+url.PathEscape(k), http.StatusOK, &l)
		if l.Key != k {
			t.Errorf("key %q came back as %q", k, l.Key)
		}
	}
	var notFound admin.Error
	e.getJSON("/v1/locks/app/zzz", http.StatusNotFound, &notFound)
	if !strings.Contains(notFound.Error, "app/zzz") {
		t.Errorf("404 error = %q", notFound.Error)
	}
}

func TestSessions(t *testing.T) {
	e := start(t, "")
	tb := setup(e)
	var list admin.SessionList
	e.getJSON("/v1/sessions", http.StatusOK, &list)
	if len(list.Sessions) != 3 {
		t.Fatalf("sessions = %+v, want 3", list.Sessions)
	}
	s2 := list.Sessions[1]
	if s2.ID != uint64(tb.s2.ID()) || s2.Protocol != "dlock" || s2.Peer != "10.0.0.2:5002" || s2.TTLSeconds != 3600 ||
		s2.ExpiresAt.IsZero() || s2.Held != 1 || s2.Waiting != 1 || s2.OpenedAt.IsZero() {
		t.Errorf("session 2 = %+v", s2)
	}
	if s1 := list.Sessions[0]; s1.TTLSeconds != 0 || !s1.ExpiresAt.IsZero() || s1.Held != 1 || s1.Waiting != 0 {
		t.Errorf("session 1 = %+v", s1)
	}
}

func TestActionsNeedToken(t *testing.T) {
	const token = "s3cret-token"
	e := start(t, token)
	tb := setup(e)
	tests := []struct {
		name   string
		token  string
		header []string
		want   int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"wrong token", "guess", nil, http.StatusUnauthorized},
		{"token prefix", token[:5], nil, http.StatusUnauthorized},
		{"basic auth", "", []string{"Authorization", "Basic czNjcmV0LXRva2Vu"}, http.StatusUnauthorized},
		{"cross-origin page", token, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/locks/app/a/release", "/v1/sessions/" + strconv.FormatUint(uint64(tb.s1.ID()), 10) + "/end"} {
				status, body := e.do(http.MethodPost, path, tt.token, url.Values{"reason": {"test"}}, tt.header...)
				if status != tt.want {
					t.Errorf("POST %s: status %d, want %d; body %s", path, status, tt.want, body)
				}
			}
			if holders, _ := e.svc.Lock("app/a"); len(holders.Holders) != 1 {
				t.Fatal("a refused action released the lock")
			}
		})
	}
	if got := e.logLines("admin: refused an action without a valid token"); len(got) == 0 {
		t.Error("refused actions were not logged")
	}

	// The right token: the key is released and handed to the first waiter.
	status, body := e.do(http.MethodPost, "/v1/locks/app/a/release", token, url.Values{"reason": {"stuck deploy"}})
	if status != http.StatusOK {
		t.Fatalf("release with the token: %d %s", status, body)
	}
	var rel admin.Released
	if err := json.Unmarshal(body, &rel); err != nil || rel != (admin.Released{Key: "app/a", Released: 1}) {
		t.Fatalf("release answered %s (%v)", body, err)
	}
	if err := <-tb.w2; err != nil {
		t.Fatalf("the first waiter got %v, want the lock", err)
	}
	ki, _ := e.svc.Lock("app/a")
	if len(ki.Holders) != 1 || ki.Holders[0].Session != tb.s2.ID() || len(ki.Waiters) != 1 {
		t.Errorf("after release app/a = %+v, want s2 holding and s3 waiting", ki)
	}
	lines := e.logLines("admin: force-release")
	if len(lines) != 1 || lines[0]["key"] != "app/a" || lines[0]["reason"] != "stuck deploy" ||
		!strings.HasPrefix(lines[0]["remote"].(string), "127.0.0.1:") || lines[0]["level"] != "INFO" {
		t.Errorf("force-release log = %v", lines)
	}
}

func TestForceReleaseWithoutToken(t *testing.T) {
	e := start(t, "")
	tb := setup(e)
	tests := []struct {
		path string
		want int
		body string
	}{
		{"/v1/locks/nobody/release", http.StatusOK, `{"key":"nobody","released":0}`},
		{"/v1/locks/app/b/release", http.StatusOK, `{"key":"app/b","released":2}`},
		{"/v1/locks/app/b", http.StatusNotFound, "release"}, // not an action
		{"/v1/locks/" + strings.Repeat("k", 300) + "/release", http.StatusBadRequest, "key"},
	}
	for _, tt := range tests {
		status, body := e.do(http.MethodPost, tt.path, "", nil)
		if status != tt.want || !strings.Contains(string(body), tt.body) {
			t.Errorf("POST %s = %d %s, want %d and %q", tt.path, status, body, tt.want, tt.body)
		}
	}
	if ki, ok := e.svc.Lock("app/b"); ok {
		t.Errorf("app/b still in the table: %+v", ki)
	}
	_ = tb
}

func TestEndSession(t *testing.T) {
	e := start(t, "tok")
	tb := setup(e)
	path := "/v1/sessions/" + strconv.FormatUint(uint64(tb.s1.ID()), 10) + "/end"
	status, body := e.do(http.MethodPost, path, "tok", url.Values{"reason": {"client hung"}})
	if status != http.StatusOK || !strings.Contains(string(body), `"ended":true`) {
		t.Fatalf("POST %s = %d %s", path, status, body)
	}
	select {
	case <-tb.s1.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end")
	}
	// Its lock went to the first waiter.
	if err := <-tb.w2; err != nil {
		t.Fatalf("the first waiter got %v, want the lock", err)
	}
	lines := e.logLines("admin: end-session")
	if len(lines) != 1 || lines[0]["reason"] != "client hung" || lines[0]["session"] != float64(tb.s1.ID()) {
		t.Errorf("end-session log = %v", lines)
	}

	// Ending a waiting session fails its request.
	path = "/v1/sessions/" + strconv.FormatUint(uint64(tb.s3.ID()), 10) + "/end"
	if status, body := e.do(http.MethodPost, path, "tok", nil); status != http.StatusOK {
		t.Fatalf("POST %s = %d %s", path, status, body)
	}
	if err := <-tb.w3; !errors.Is(err, latch.ErrSessionEnded) {
		t.Errorf("waiter of an ended session got %v, want ErrSessionEnded", err)
	}

	for _, tt := range []struct {
		path string
		want int
	}{
		{path, http.StatusNotFound}, // already ended
		{"/v1/sessions/999999/end", http.StatusNotFound},
		{"/v1/sessions/abc/end", http.StatusBadRequest},
		{"/v1/sessions/0/end", http.StatusBadRequest},
	} {
		status, body := e.do(http.MethodPost, tt.path, "tok", nil)
		var er admin.Error
		if status != tt.want || json.Unmarshal(body, &er) != nil || er.Error == "" {
			t.Errorf("POST %s = %d %s, want %d with an error", tt.path, status, body, tt.want)
		}
	}
}

func TestHealth(t *testing.T) {
	e := start(t, "")
	for _, tt := range []struct {
		path string
		want int
		body string
	}{
		{"/healthz", http.StatusOK, "ok"},
		{"/readyz", http.StatusOK, "ready"},
		{"/debug/pprof/", http.StatusOK, "goroutine"},
		{"/debug/pprof/cmdline", http.StatusOK, ""},
		{"/", http.StatusOK, "<title>latch"},
		{"/ui/app.js", http.StatusOK, "use strict"},
		{"/ui/style.css", http.StatusOK, "prefers-color-scheme"},
		{"/nope", http.StatusNotFound, ""},
	} {
		status, body := e.do(http.MethodGet, tt.path, "", nil)
		if status != tt.want || !strings.Contains(string(body), tt.body) {
			t.Errorf("GET %s = %d (%d bytes), want %d containing %q", tt.path, status, len(body), tt.want, tt.body)
		}
	}
	// The page loads nothing from elsewhere.
	resp, err := http.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	// Requests are logged at debug level only.
	e.eventually("request log", func() bool { return len(e.logLines("admin: request")) > 0 })
	for _, l := range e.logLines("admin: request") {
		if l["level"] != "DEBUG" {
			t.Errorf("request logged at %v", l["level"])
		}
	}
	if l := e.logLines("admin: listening"); len(l) != 1 || l[0]["level"] != "INFO" || l[0]["addr"] != e.srv.AdminAddr().String() {
		t.Errorf("listening log = %v", l)
	}
}

func TestReadyz(t *testing.T) {
	m := newTestAdmin(t, func() error { return errors.New("shutting down") })
	status, body := m.do(http.MethodGet, "/readyz", "", nil)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting down") {
		t.Errorf("GET /readyz = %d %s, want 503", status, body)
	}
}

func TestStats(t *testing.T) {
	e := start(t, "")
	setup(e)
	var st admin.Stats
	e.getJSON("/v1/stats", http.StatusOK, &st)
	if st.Held != 4 || st.Waiters != 2 || st.Sessions != 3 || st.Keys != 3 || st.Version != "v0.0.0-test" {
		t.Errorf("stats = held %d waiters %d sessions %d keys %d version %q", st.Held, st.Waiters, st.Sessions, st.Keys, st.Version)
	}
	if st.Totals.Grants != 4 || st.Totals.Protocol != "all" || st.Wait.Count != 4 {
		t.Errorf("totals = %+v, wait %+v", st.Totals, st.Wait)
	}
	var protos []string
	for _, p := range st.Protocols {
		protos = append(protos, p.Protocol)
	}
	if !slices.Equal(protos, []string{"dlock", "memcache", "redis", "zookeeper"}) {
		t.Errorf("protocols = %q", protos)
	}
	var h admin.History
	e.getJSON("/v1/stats/history", http.StatusOK, &h)
	if h.IntervalSeconds != 1 {
		t.Errorf("history interval = %v", h.IntervalSeconds)
	}
	var bad admin.Error
	e.getJSON("/v1/stats/history?since=yesterday", http.StatusBadRequest, &bad)
}
