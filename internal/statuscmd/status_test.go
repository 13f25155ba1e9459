package statuscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/latchtest"
)

// startServer runs a server with its admin API on a free loopback port and
// a lock table of two keys: "jobs/a" held by a memcache session and waited
// for by a dlock one, "jobs/b" held shared with a lease.
func startServer(t *testing.T) (addr string, waiter latch.Session) {
	t.Helper()
	srv := latchtest.Start(t)
	svc := srv.Service()
	open := func(proto, peer string) latch.Session {
		s, err := svc.OpenSession(latch.SessionOptions{Protocol: proto, Peer: peer})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open("memcache", "10.0.0.1:1111"), open("dlock", "10.0.0.2:2222")
	ctx := context.Background()
	if _, err := a.Acquire(ctx, latch.LockRequest{Keys: []string{"jobs/a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, latch.LockRequest{Keys: []string{"jobs/b"}, Mode: latch.Shared, Limit: 4, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	go b.Acquire(ctx, latch.LockRequest{Keys: []string{"jobs/a"}, Wait: latch.WaitForever})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ki, _ := svc.Lock("jobs/a"); len(ki.Waiters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return srv.Admin, b
}

func TestRunTable(t *testing.T) {
	addr, b := startServer(t)
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Addr: addr, Out: &out}); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	text := out.String()
	t.Logf("output:\n%s", text)
	for _, want := range []string{
		"LOCKS: 2 keys, 2 holders, 1 waiter",
		"SESSIONS: 2",
		"shared (limit 4)",
		"waiting (0 ahead)",
		"10.0.0.2:2222",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Columns line up: each field of a row starts under its heading.
	lines := strings.Split(text, "\n")
	var header, held, waiting string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "KEY "):
			header = l
		case strings.HasPrefix(l, "jobs/a ") && strings.Contains(l, " held "):
			held = l
		case strings.HasPrefix(l, "jobs/a ") && strings.Contains(l, "waiting"):
			waiting = l
		}
	}
	if header == "" || held == "" || waiting == "" {
		t.Fatalf("missing the header or a row of jobs/a")
	}
	for _, col := range []struct{ heading, held, waiting string }{
		{"STATE", "held", "waiting (0 ahead)"},
		{"MODE", "exclusive", "exclusive"},
		{"PROTOCOL", "memcache", "dlock"},
		{"PEER", "10.0.0.1:1111", "10.0.0.2:2222"},
	} {
		at := strings.Index(header, col.heading)
		if strings.Index(held, col.held) != at || strings.Index(waiting, col.waiting) != at {
			t.Errorf("column %s at %d: held row has %q at %d, waiting row %q at %d", col.heading, at,
				col.held, strings.Index(held, col.held), col.waiting, strings.Index(waiting, col.waiting))
		}
	}
	_ = b
}

func TestRunPrefix(t *testing.T) {
	addr, _ := startServer(t)
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Addr: "http://" + addr + "/", Prefix: "jobs/b", Out: &out}); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "LOCKS: 1 key, 1 holder, 0 waiters") || strings.Contains(text, "jobs/a") {
		t.Errorf("--prefix jobs/b output:\n%s", text)
	}
}

func TestRunJSON(t *testing.T) {
	addr, b := startServer(t)
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Addr: addr, JSON: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("output is not the JSON of a Status: %v\n%s", err, out.String())
	}
	if len(st.Locks.Locks) != 2 || len(st.Sessions.Sessions) != 2 {
		t.Fatalf("status = %+v", st)
	}
	if w := st.Locks.Locks[0].Waiters; len(w) != 1 || w[0].Session != uint64(b.ID()) {
		t.Errorf("jobs/a waiters = %+v", w)
	}
	if !strings.Contains(out.String(), `"acquired_at"`) {
		t.Error("JSON lacks the API's field names")
	}
}

func TestRunWatch(t *testing.T) {
	addr, _ := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &latchtest.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Addr: addr, Watch: true, Interval: time.Millisecond, Out: out}) }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), clearScreen) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("--watch did not redraw")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run(--watch) after interrupt = %v, want nil", err)
	}
	if n := strings.Count(out.String(), "LOCKS: 2 keys"); n < 3 {
		t.Errorf("%d tables drawn, want one per redraw", n)
	}
}

func TestRunUnreachable(t *testing.T) {
	err := Run(context.Background(), Options{Addr: "127.0.0.1:1", Out: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "latch status") {
		t.Fatalf("Run() against nothing = %v, want an error", err)
	}
	var ue interface{ Unwrap() error }
	if !errors.As(err, &ue) {
		t.Errorf("error %v wraps nothing", err)
	}
}

func TestFmtDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{1500 * time.Nanosecond, "2µs"},
		{1234 * time.Millisecond, "1.2s"},
		{850 * time.Millisecond, "850ms"},
		{3240 * time.Millisecond, "3.2s"},
		{4*time.Minute + 12400*time.Millisecond, "4m12s"},
		{2*time.Hour + 3*time.Minute + 20*time.Second, "2h3m"},
		{time.Hour - time.Millisecond, "1h0m"},
	}
	for _, tt := range tests {
		if got := fmtDuration(tt.d); got != tt.want {
			t.Errorf("fmtDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestWriteZooKeeper checks the sessions part of the table: a ZooKeeper
// session (one with an ephemerals list) adds an EPHEMERALS column and a
// table of its ephemeral znodes; without one the output is as before.
func TestWriteZooKeeper(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dl := admin.Session{ID: 1, Protocol: "dlock", Peer: "10.0.0.1:1", OpenedAt: admin.Time{Time: at.Add(-time.Minute)}}
	zk := admin.Session{ID: 2, Protocol: "zookeeper", OpenedAt: admin.Time{Time: at.Add(-time.Second)}, TTLSeconds: 10,
		Ephemerals: []string{"/app/lock-1", "/app/lock-2"}}
	bare := admin.Session{ID: 3, Protocol: "zookeeper", OpenedAt: admin.Time{Time: at}, TTLSeconds: 6, Ephemerals: []string{}}
	for _, tt := range []struct {
		name     string
		sessions []admin.Session
		want     []string
		not      []string
	}{
		{
			name:     "no ZooKeeper session",
			sessions: []admin.Session{dl},
			want:     []string{"SESSIONS: 1\n", "ID  PROTOCOL  PEER        OPEN FOR  HOLDS  WAITS  TTL\n"},
			not:      []string{"EPHEMERAL", "ZooKeeper"},
		},
		{
			name:     "ZooKeeper sessions",
			sessions: []admin.Session{dl, zk, bare},
			want: []string{
				"SESSIONS: 3, 2 ZooKeeper with 2 ephemeral znodes\n",
				"ID  PROTOCOL   PEER        OPEN FOR  HOLDS  WAITS  TTL  EPHEMERALS\n",
				"1   dlock      10.0.0.1:1  1m0s      0      0      -    -\n",
				"2   zookeeper  -           1s        0      0      10s  2\n",
				"3   zookeeper  -           0s        0      0      6s   0\n",
				"EPHEMERAL ZNODES: 2\nPATH         SESSION\n/app/lock-1  2\n/app/lock-2  2\n",
			},
		},
		{
			name:     "no ephemeral",
			sessions: []admin.Session{bare},
			want:     []string{"SESSIONS: 1, 1 ZooKeeper with 0 ephemeral znodes\n", "TTL  EPHEMERALS\n"},
			not:      []string{"EPHEMERAL ZNODES"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Status{
				Locks:    admin.LockList{Time: admin.Time{Time: at}},
				Sessions: admin.SessionList{Sessions: tt.sessions, Time: admin.Time{Time: at}},
			}
			var out bytes.Buffer
			if err := Write(&out, st, "test"); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(text, n) {
					t.Errorf("output has %q:\n%s", n, text)
				}
			}
		})
	}
}
