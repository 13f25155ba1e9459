//go:build unix

package runlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/latchtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startServer starts an in-process server (latchtest.Start), shut down
// when the test ends, and returns it and its dlock address.
func startServer(t *testing.T) (*latchtest.Server, string) {
	t.Helper()
	srv := latchtest.Start(t)
	return srv, srv.DLock
}

func holders(srv *latchtest.Server, key string) int {
	info, _ := srv.Service().Lock(key)
	return len(info.Holders)
}

// testConfig returns a Config that runs sh -c script under key on addr,
// with the test's output as the command's.
func testConfig(addr, key, script string) Config {
	cfg := DefaultConfig()
	cfg.Addr = addr
	cfg.Keys = []string{key}
	cfg.Command = []string{"sh", "-c", script}
	cfg.Stdout, cfg.Stderr = io.Discard, io.Discard
	return cfg
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runResult is what Run returned.
type runResult struct {
	code int
	err  error
}

// startRun runs Run in the background; its result arrives on the channel.
func startRun(ctx context.Context, cfg Config) <-chan runResult {
	got := make(chan runResult, 1)
	go func() {
		code, err := Run(ctx, cfg)
		got <- runResult{code, err}
	}()
	return got
}

// awaitRun waits up to 20 s for Run's result.
func awaitRun(t *testing.T, got <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return runResult{}
	}
}

// holdKey takes key through a client of its own, closed at the test's end.
func holdKey(t *testing.T, addr, key string) *client.Lock {
	t.Helper()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := c.Lock(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// awaitWaiter waits until key has one request waiting for it.
func awaitWaiter(t *testing.T, srv *latchtest.Server, key string) {
	t.Helper()
	eventually(t, "Run waits for "+key, func() bool {
		info, _ := srv.Service().Lock(key)
		return len(info.Waiters) == 1
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestTiming(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Keys, c.Command = []string{"k"}, []string{"true"}
		return c
	}
	tests := []struct {
		name    string
		modify  func(*Config)
		want    timing
		wantErr string
	}{
		{name: "defaults", modify: func(*Config) {},
			want: timing{ttl: 10 * time.Second, killAfter: time.Second, margin: 3 * time.Second}},
		{name: "lease", modify: func(c *Config) { c.Lease = 12 * time.Second },
			want: timing{ttl: 10 * time.Second, killAfter: time.Second, margin: 3 * time.Second, lease: 12 * time.Second, renew: 3 * time.Second}},
		{name: "kill-after", modify: func(c *Config) { c.SessionTTL, c.KillAfter = 4*time.Second, time.Second },
			want: timing{ttl: 4 * time.Second, killAfter: time.Second, margin: 1800 * time.Millisecond}},
		{name: "kill-after too long", modify: func(c *Config) { c.KillAfter = 3 * time.Second }, wantErr: "kill-after 3s"},
		{name: "lease too short", modify: func(c *Config) { c.Lease = 11 * time.Second }, wantErr: "lease 11s: must be at least 12s"},
		{name: "negative TTL", modify: func(c *Config) { c.SessionTTL = -1 }, wantErr: "session TTL"},
		{name: "no keys", modify: func(c *Config) { c.Keys = nil }, wantErr: "no key"},
		{name: "bad key", modify: func(c *Config) { c.Keys = []string{"a b"} }, wantErr: "invalid key"},
		{name: "no command", modify: func(c *Config) { c.Command = nil }, wantErr: "no command"},
		{name: "limit without shared", modify: func(c *Config) { c.Limit = 2 }, wantErr: "limit needs a shared lock"},
		{name: "conflict code", modify: func(c *Config) { c.ConflictCode = 256 }, wantErr: "conflict exit code"},
		{name: "no address", modify: func(c *Config) { c.Addr = "" }, wantErr: "no server address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.modify(&c)
			got, err := c.timing()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("timing() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("timing() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("timing() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	_, addr := startServer(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command []string
		want    int
		wantErr bool
	}{
		{"success", []string{"true"}, 0, false},
		{"exit code", []string{"sh", "-c", "exit 3"}, 3, false},
		{"killed by a signal", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15, false},
		{"not found", []string{"latch-no-such-command"}, ExitNotFound, true},
		{"not executable", []string{notExec}, ExitCannotRun, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(addr, "k", "")
			cfg.Command = tt.command
			code, err := Run(context.Background(), cfg)
			if code != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Run() = %d, %v; want %d, error %v", code, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRunEnvironment(t *testing.T) {
	srv, addr := startServer(t)
	out := filepath.Join(t.TempDir(), "env")
	cfg := testConfig(addr, "", `echo "$LATCH_TOKEN|$LATCH_KEYS|$INHERITED" > "$OUT"`)
	cfg.Keys = []string{"b", "a"}
	cfg.Env = []string{"OUT=" + out, "INHERITED=yes", "LATCH_TOKEN=stale", "PATH=" + os.Getenv("PATH")}
	if code, err := Run(context.Background(), cfg); code != 0 || err != nil {
		t.Fatalf("Run() = %d, %v", code, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(string(b)), "|")
	if len(parts) != 3 {
		t.Fatalf("the command printed %q", b)
	}
	if tok, err := strconv.ParseUint(parts[0], 10, 64); err != nil || tok == 0 {
		t.Errorf("LATCH_TOKEN = %q, want a fencing token", parts[0])
	}
	if parts[1] != "b a" || parts[2] != "yes" {
		t.Errorf("LATCH_KEYS = %q, INHERITED = %q; want \"b a\" and \"yes\"", parts[1], parts[2])
	}
	if n := holders(srv, "a"); n != 0 {
		t.Errorf("a still has %d holders after the command exited", n)
	}
}

func TestRunConflict(t *testing.T) {
	_, addr := startServer(t)
	c, err := client.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Lock(context.Background(), []string{"k"}); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{latch.NoWait, 20 * time.Millisecond} {
		ran := filepath.Join(t.TempDir(), "ran")
		cfg := testConfig(addr, "k", "touch "+ran)
		cfg.Wait, cfg.ConflictCode = wait, 9
		code, err := Run(context.Background(), cfg)
		var busy *latch.BusyError
		if code != 9 || !errors.As(err, &busy) {
			t.Errorf("Run(wait %v) = %d, %v; want 9 and a BusyError", wait, code, err)
		}
		if exists(ran) {
			t.Errorf("wait %v: the command ran without the lock", wait)
		}
	}
}

// Commands run under one key never overlap.
func TestRunMutualExclusion(t *testing.T) {
	_, addr := startServer(t)
	log := filepath.Join(t.TempDir(), "log")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			cfg := testConfig(addr, "k", `echo start >> "$LOG"; sleep 0.02; echo end >> "$LOG"`)
			cfg.Env = append(os.Environ(), "LOG="+log)
			if code, err := Run(context.Background(), cfg); code != 0 || err != nil {
				t.Errorf("Run() = %d, %v", code, err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("start\nend\n", 4); string(b) != want {
		t.Errorf("log:\n%s\nwant start/end pairs, never interleaved", b)
	}
}

// When the server goes away, the command is stopped: its whole process
// group, with SIGKILL for what ignores SIGTERM.
func TestRunServerGone(t *testing.T) {
	srv, addr := startServer(t)
	dir := t.TempDir()
	// The shell ignores SIGTERM; its background child writes its pid.
	cfg := testConfig(addr, "k", `trap '' TERM; sleep 1000 & echo $! > "$DIR/pid"; touch "$DIR/held"; wait; wait`)
	cfg.Env = append(os.Environ(), "DIR="+dir)
	cfg.KillAfter = 50 * time.Millisecond
	done := make(chan struct{})
	var code int
	var runErr error
	go func() {
		defer close(done)
		code, runErr = Run(context.Background(), cfg)
	}()
	eventually(t, "the command runs", func() bool { return exists(filepath.Join(dir, "held")) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	<-done
	if code != ExitError || !errors.Is(runErr, latch.ErrSessionEnded) {
		t.Errorf("Run() = %d, %v; want %d and ErrSessionEnded", code, runErr, ExitError)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the command's background process is gone", func() bool {
		return processGone(pid)
	})
}

// processGone reports whether the process pid has exited: it no longer
// exists, or it is a zombie waiting for a parent (init, for an orphan) to
// reap it.
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// The guarantee: in a partition, the command is dead before the server
// could release the lock.
func TestRunPartition(t *testing.T) {
	srv, addr := startServer(t)
	p := startProxy(t, addr)
	dir := t.TempDir()
	cfg := testConfig(p.addr, "k", `trap '' TERM; touch "$DIR/held"; while :; do sleep 0.01; done`)
	cfg.Env = append(os.Environ(), "DIR="+dir)
	cfg.SessionTTL, cfg.KillAfter = 3*time.Second, 100*time.Millisecond
	// Run logs "command stopped" once the command is dead, before it
	// closes the connection (which releases the lock at once).
	holdersWhenStopped := -1
	cfg.Logger = slog.New(onMessage{"command stopped", func() { holdersWhenStopped = holders(srv, "k") }})
	done := make(chan struct{})
	var code int
	var runErr error
	go func() {
		defer close(done)
		code, runErr = Run(context.Background(), cfg)
	}()
	eventually(t, "the command runs", func() bool { return exists(filepath.Join(dir, "held")) })
	p.partitioned.Store(true)
	<-done
	if holdersWhenStopped != 1 {
		t.Fatalf("k had %d holders when the command was dead, want the session still holding it", holdersWhenStopped)
	}
	if code != ExitError || !errors.Is(runErr, client.ErrKeepalive) {
		t.Errorf("Run() = %d, %v; want %d and ErrKeepalive", code, runErr, ExitError)
	}
	eventually(t, "the server releases k", func() bool { return holders(srv, "k") == 0 })
}

// A lease is renewed while the command runs, beyond its length.
func TestRunLease(t *testing.T) {
	srv, addr := startServer(t)
	cfg := testConfig(addr, "k", "sleep 3")
	cfg.SessionTTL, cfg.KillAfter, cfg.Lease = 2*time.Second, 100*time.Millisecond, 2*time.Second
	got := startRun(context.Background(), cfg)
	// The lease is the server's: see it there.
	eventually(t, "k is leased", func() bool {
		info, _ := srv.Service().Lock("k")
		return len(info.Holders) == 1 && !info.Holders[0].Expires.IsZero()
	})
	if r := <-got; r.code != 0 || r.err != nil {
		t.Fatalf("Run() = %d, %v; want the command to run to its end", r.code, r.err)
	}
}

func TestRunShared(t *testing.T) {
	_, addr := startServer(t)
	dir := t.TempDir()
	// Each reader waits for the other: they must hold the lock together.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			cfg := testConfig(addr, "k", `touch "$DIR/r$I"; while [ ! -e "$DIR/r0" ] || [ ! -e "$DIR/r1" ]; do sleep 0.01; done; while [ ! -e "$DIR/checked" ]; do sleep 0.01; done`)
			cfg.Env = append(os.Environ(), "DIR="+dir, "I="+strconv.Itoa(i))
			cfg.Mode = latch.Shared
			if code, err := Run(context.Background(), cfg); code != 0 || err != nil {
				t.Errorf("reader %d: Run() = %d, %v", i, code, err)
			}
		})
	}
	eventually(t, "both readers hold the lock", func() bool {
		return exists(filepath.Join(dir, "r0")) && exists(filepath.Join(dir, "r1"))
	})
	cfg := testConfig(addr, "k", "true")
	cfg.Wait = latch.NoWait
	if code, _ := Run(context.Background(), cfg); code != ExitConflict {
		t.Errorf("writer beside readers: Run() = %d, want %d", code, ExitConflict)
	}
	os.WriteFile(filepath.Join(dir, "checked"), nil, 0o644)
	wg.Wait()
}

// proxy forwards connections to a server until partitioned, when it drops
// every byte both ways and keeps the connections open.
type proxy struct {
	addr        string
	partitioned atomic.Bool
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{}
	p.addr = relay(t, target, func(wg *sync.WaitGroup, in, out net.Conn) {
		wg.Go(func() { p.pipe(in, out) })
		wg.Go(func() { p.pipe(out, in) })
	})
	return p
}

// relay listens on loopback and returns its address. It dials target for
// each connection it accepts and hands both ends to serve, which starts
// the goroutines that pass their bytes on (in wg). The test's cleanup
// closes the listener and every connection, and waits for wg.
func relay(t *testing.T, target string, serve func(wg *sync.WaitGroup, in, out net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			serve(&wg, in, out)
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func (p *proxy) pipe(src, dst net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.partitioned.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// onMessage is a slog.Handler that calls f, in the logging goroutine, for
// every record with message msg.
type onMessage struct {
	msg string
	f   func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onMessage) WithGroup(string) slog.Handler            { return h }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.f()
	}
	return nil
}
