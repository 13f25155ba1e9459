package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is the default configuration with every listener on a free
// loopback port, so that tests never bind the well-known ports.
func testConfig() config.Config {
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr = "127.0.0.1:0"
	cfg.DLock.Addr = "127.0.0.1:0"
	cfg.Redis.Addr = "127.0.0.1:0"
	cfg.ZooKeeper.Addr = "127.0.0.1:0"
	cfg.Admin.Addr = "127.0.0.1:0"
	return cfg
}

// newServer starts a server on cfg and shuts it down when the test ends.
// newFails checks that New refuses cfg with an error that names want.
func newFails(t *testing.T, cfg config.Config, want string) {
	t.Helper()
	s, err := New(cfg, nil)
	if err == nil {
		s.Shutdown(context.Background())
		t.Fatalf("New() error = nil, want an error naming %s", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("New() error = %q, want it to name %s", err, want)
	}
}

func newServer(t *testing.T, cfg config.Config) *Server {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown() error = %v", err)
		}
	})
	return s
}

func openSession(t *testing.T, svc latch.Service) latch.Session {
	t.Helper()
	sess, err := svc.OpenSession(latch.SessionOptions{Protocol: "test", Peer: t.Name()})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config.Config)
		want   string
	}{
		{"bad log level", func(c *config.Config) { c.Log.Level = "loud" }, "log-level"},
		{"negative max-keys", func(c *config.Config) { c.Lock.MaxKeys = -1 }, "max-keys"},
		{"zero shutdown-timeout", func(c *config.Config) { c.Server.ShutdownTimeout = 0 }, "shutdown-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			tt.modify(&cfg)
			newFails(t, cfg, tt.want)
		})
	}
}

func TestServiceLocks(t *testing.T) {
	s := newServer(t, testConfig())
	a := openSession(t, s.Service())
	b := openSession(t, s.Service())
	ctx := context.Background()

	g, err := a.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}})
	if err != nil {
		t.Fatalf("a.Acquire(k) error = %v", err)
	}
	if g.Token == 0 {
		t.Errorf("a.Acquire(k) token = 0, want a fencing token")
	}
	if _, err := b.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}}); !errors.Is(err, latch.ErrWouldBlock) {
		t.Fatalf("b.Acquire(k) error = %v, want ErrWouldBlock", err)
	}
	if err := a.Release("k"); err != nil {
		t.Fatalf("a.Release(k) error = %v", err)
	}
	g2, err := b.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}})
	if err != nil {
		t.Fatalf("b.Acquire(k) after release error = %v", err)
	}
	if g2.Token <= g.Token {
		t.Errorf("second token %d, want more than the first %d", g2.Token, g.Token)
	}
}

func TestConfigReachesService(t *testing.T) {
	t.Run("max-keys", func(t *testing.T) {
		cfg := testConfig()
		cfg.Lock.MaxKeys = 2
		s := newServer(t, cfg)
		sess := openSession(t, s.Service())
		_, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{"a", "b", "c"}})
		if !errors.Is(err, latch.ErrTooManyKeys) {
			t.Fatalf("Acquire(3 keys) error = %v, want ErrTooManyKeys", err)
		}
		if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{"a", "b"}}); err != nil {
			t.Fatalf("Acquire(2 keys) error = %v", err)
		}
	})
	t.Run("lock-delay", func(t *testing.T) {
		cfg := testConfig()
		cfg.Lock.LockDelay = time.Hour
		s := newServer(t, cfg)
		svc := s.Service()
		dying := openSession(t, svc)
		if _, err := dying.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}}); err != nil {
			t.Fatal(err)
		}
		// An operator ends the session as if it had died: its key stays
		// unavailable for the default lock-delay.
		if err := svc.EndSession(dying.ID()); err != nil {
			t.Fatalf("EndSession() error = %v", err)
		}
		other := openSession(t, svc)
		if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}}); !errors.Is(err, latch.ErrWouldBlock) {
			t.Fatalf("Acquire(k) under lock-delay error = %v, want ErrWouldBlock", err)
		}
	})
}

func TestShutdownAnswersWaiters(t *testing.T) {
	s, err := New(testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := s.Service()
	holder := openSession(t, svc)
	waiter := openSession(t, svc)
	if _, err := holder.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Wait: latch.WaitForever})
		waited <- err
	}()
	// Wait until the request is queued, so that Shutdown finds it parked.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := svc.Lock("k")
		if len(info.Waiters) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never queued")
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() error = %v", err)
	}
	if err := <-waited; !errors.Is(err, latch.ErrShutdown) {
		t.Errorf("waiting Acquire error = %v, want ErrShutdown", err)
	}
	select {
	case <-holder.Done():
	default:
		t.Error("a session is still alive after Shutdown")
	}
	if _, err := svc.OpenSession(latch.SessionOptions{}); !errors.Is(err, latch.ErrShutdown) {
		t.Errorf("OpenSession() after Shutdown error = %v, want ErrShutdown", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown() error = %v, want nil", err)
	}
}

// fakeComponent records its calls in a shared log.
type fakeComponent struct {
	name        string
	log         *callLog
	startErr    error
	shutdownErr error
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func (c *fakeComponent) Name() string { return c.name }

func (c *fakeComponent) Start() error {
	c.log.add("start " + c.name)
	return c.startErr
}

func (c *fakeComponent) Shutdown(ctx context.Context) error {
	c.log.add("shutdown " + c.name)
	return c.shutdownErr
}

func TestComponents(t *testing.T) {
	errBind := errors.New("address already in use")
	errStuck := errors.New("connections still open")
	tests := []struct {
		name         string
		comps        []fakeComponent
		wantStartErr string
		wantErr      string // of Shutdown
		wantCalls    []string
	}{
		{
			name:      "start in order, shut down in reverse",
			comps:     []fakeComponent{{name: "memcache"}, {name: "dlock"}, {name: "admin"}},
			wantCalls: []string{"start memcache", "start dlock", "start admin", "shutdown admin", "shutdown dlock", "shutdown memcache"},
		},
		{
			name:         "a failed start stops the started ones only",
			comps:        []fakeComponent{{name: "memcache"}, {name: "dlock", startErr: errBind}, {name: "admin"}},
			wantStartErr: "server: starting dlock: address already in use",
			wantCalls:    []string{"start memcache", "start dlock", "shutdown memcache"},
		},
		{
			name:      "shutdown errors are joined and named",
			comps:     []fakeComponent{{name: "memcache", shutdownErr: errStuck}, {name: "dlock"}, {name: "admin", shutdownErr: errStuck}},
			wantErr:   "server: shutting down admin: connections still open\nserver: shutting down memcache: connections still open",
			wantCalls: []string{"start memcache", "start dlock", "start admin", "shutdown admin", "shutdown dlock", "shutdown memcache"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(testConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			log := &callLog{}
			var comps []component
			for i := range tt.comps {
				tt.comps[i].log = log
				comps = append(comps, &tt.comps[i])
			}
			err = s.start(comps)
			if got := fmt.Sprint(err); (err != nil || tt.wantStartErr != "") && got != tt.wantStartErr {
				t.Errorf("start() error = %v, want %q", err, tt.wantStartErr)
			}
			err = s.Shutdown(context.Background())
			if got := fmt.Sprint(err); (err != nil || tt.wantErr != "") && got != tt.wantErr {
				t.Errorf("Shutdown() error = %q, want %q", got, tt.wantErr)
			}
			if got := log.get(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("calls = %q, want %q", got, tt.wantCalls)
			}
		})
	}
}
