//go:build unix

package runlock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/latchtest"
)

// nodeProxy stands for a cluster node in front of a server: it forwards
// dlock connections to the server frame by frame until it fails. Silence
// makes it drop everything both ways, as a stopped node or a partition
// does; shutDown makes it answer every request in flight and every later
// one Unavailable, without passing them on, as a node shutting down does
// with the sessions with a TTL it lets go of. Either way it keeps the
// connections open. The requests it did pass on may wait on the server
// until the session is resumed elsewhere, which aborts them.
type nodeProxy struct {
	addr string

	mu     sync.Mutex
	silent bool
	down   bool
	// downOnLock shuts the proxy down when a Lock request reaches it.
	downOnLock bool
	conns      []*proxyConn
}

// proxyConn is a client's connection through a nodeProxy.
type proxyConn struct {
	p       *nodeProxy
	in, out net.Conn
	wmu     sync.Mutex          // serializes writes to in
	flight  map[uint64]struct{} // requests passed on; guarded by p.mu
}

func startNodeProxy(t *testing.T, target string) *nodeProxy {
	p := &nodeProxy{}
	p.addr = relay(t, target, func(wg *sync.WaitGroup, in, out net.Conn) {
		pc := &proxyConn{p: p, in: in, out: out, flight: map[uint64]struct{}{}}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		wg.Go(pc.requests)
		wg.Go(pc.responses)
	})
	return p
}

func (p *nodeProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = true
}

func (p *nodeProxy) shutDown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shutDownLocked()
}

func (p *nodeProxy) shutDownLocked() {
	p.down = true
	for _, pc := range p.conns {
		for id := range pc.flight {
			go pc.answer(unavailable(id))
		}
		clear(pc.flight)
	}
}

func unavailable(id uint64) *dlockpb.Response {
	return &dlockpb.Response{Version: 3, RequestId: id, Status: dlockpb.ResponseStatus_Unavailable,
		ErrorText: "this node is shutting down"}
}

// requests passes the client's requests on, or answers them.
func (pc *proxyConn) requests() {
	defer pc.out.Close()
	latchtest.EachMessage(pc.in, func() *dlockpb.Request { return new(dlockpb.Request) }, func(b []byte, req *dlockpb.Request) bool {
		p := pc.p
		p.mu.Lock()
		if p.downOnLock && req.GetType() == dlockpb.RequestType_Lock {
			p.shutDownLocked()
		}
		silent, down := p.silent, p.down
		if !silent && !down {
			pc.flight[req.GetId()] = struct{}{}
		}
		p.mu.Unlock()
		switch {
		case silent:
		case down:
			pc.answer(unavailable(req.GetId()))
		default:
			if _, err := pc.out.Write(frame.Append(nil, b)); err != nil {
				return false
			}
		}
		return true
	})
}

// responses passes the server's answers on, while the proxy works.
func (pc *proxyConn) responses() {
	defer pc.in.Close()
	latchtest.EachMessage(pc.out, func() *dlockpb.Response { return new(dlockpb.Response) }, func(_ []byte, resp *dlockpb.Response) bool {
		p := pc.p
		p.mu.Lock()
		_, inFlight := pc.flight[resp.GetRequestId()]
		delete(pc.flight, resp.GetRequestId())
		pass := inFlight && !p.silent && !p.down
		p.mu.Unlock()
		if pass {
			pc.answer(resp)
		}
		return true
	})
}

func (pc *proxyConn) answer(resp *dlockpb.Response) {
	b, err := proto.Marshal(resp)
	if err != nil {
		panic(err)
	}
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	pc.in.Write(frame.Append(nil, b))
}

// logRecorder is a slog.Handler that keeps the messages logged.
type logRecorder struct {
	mu   *sync.Mutex
	msgs *[]string
}

func newLogRecorder() logRecorder { return logRecorder{new(sync.Mutex), new([]string)} }

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logRecorder) WithGroup(string) slog.Handler            { return h }
func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}

func (h logRecorder) has(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(*h.msgs, msg)
}

const retryMsg = "lock request lost in a failover of the session; retrying it"

// latch run rides through a failover of its session while it waits for
// the lock: the node it waits through fails, its request is lost, the
// session moves to another node, the request is sent again there, and
// the command runs once the holder lets go.
func TestRunFailover(t *testing.T) {
	tests := []struct {
		name   string
		mode   latch.Mode
		wait   time.Duration
		busy   bool               // another client holds the key until the failover
		fail   func(p *nodeProxy) // fails the first node, while Run waits
		before func(p *nodeProxy) // sets the first node up before Run
	}{
		{name: "node silent", mode: latch.Exclusive, wait: latch.WaitForever, busy: true,
			fail: (*nodeProxy).silence},
		{name: "node shut down", mode: latch.Exclusive, wait: latch.WaitForever, busy: true,
			fail: (*nodeProxy).shutDown},
		{name: "node shut down, wait", mode: latch.Exclusive, wait: time.Minute, busy: true,
			fail: (*nodeProxy).shutDown},
		{name: "node silent, shared", mode: latch.Shared, wait: latch.WaitForever, busy: true,
			fail: (*nodeProxy).silence},
		{name: "node shut down, no wait", mode: latch.Exclusive, wait: latch.NoWait,
			before: func(p *nodeProxy) { p.downOnLock = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, addr := startServer(t)
			first, second := startNodeProxy(t, addr), startNodeProxy(t, addr)
			if tt.before != nil {
				tt.before(first)
			}
			ctx := context.Background()
			var holder *client.Lock
			if tt.busy {
				holder = holdKey(t, addr, "k")
			}
			dir := t.TempDir()
			cfg := testConfig(first.addr+","+second.addr, "k", `touch "$DIR/ran"`)
			cfg.Env = append(os.Environ(), "DIR="+dir)
			cfg.Mode, cfg.Wait = tt.mode, tt.wait
			cfg.SessionTTL, cfg.KillAfter = 3*time.Second, 100*time.Millisecond
			logs := newLogRecorder()
			cfg.Logger = slog.New(logs)
			got := startRun(ctx, cfg)
			if tt.busy {
				awaitWaiter(t, srv, "k")
				tt.fail(first)
				eventually(t, "the session moves and the request is retried", func() bool {
					return logs.has("client: session resumed") && logs.has(retryMsg) || len(got) > 0
				})
				if err := holder.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if r := awaitRun(t, got); r.code != 0 || r.err != nil {
				t.Fatalf("Run() = %d, %v; want the command run under the lock after the failover", r.code, r.err)
			}
			if !exists(filepath.Join(dir, "ran")) {
				t.Error("the command did not run")
			}
			if !logs.has(retryMsg) {
				t.Errorf("no %q in the log", retryMsg)
			}
		})
	}
}

// When the session itself is lost while latch run waits for the lock (no
// server takes it back, or the one that answers no longer has it), latch
// run fails, once the Client has given the session up, without running
// the command.
func TestRunFailoverSessionLost(t *testing.T) {
	tests := []struct {
		name string
		// second returns the address of the other node, and is given
		// the first.
		second func(t *testing.T, srv string, first *nodeProxy) string
	}{
		{name: "no node answers", second: func(t *testing.T, srv string, first *nodeProxy) string {
			p := startNodeProxy(t, srv)
			p.silence()
			return p.addr
		}},
		{name: "the other node does not have the session", second: func(t *testing.T, _ string, _ *nodeProxy) string {
			_, other := startServer(t)
			return other
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, addr := startServer(t)
			holdKey(t, addr, "k")
			first := startNodeProxy(t, addr)
			dir := t.TempDir()
			cfg := testConfig(first.addr+","+tt.second(t, addr, first), "k", `touch "$DIR/ran"`)
			cfg.Env = append(os.Environ(), "DIR="+dir)
			cfg.SessionTTL, cfg.KillAfter = 3*time.Second, 100*time.Millisecond
			got := startRun(context.Background(), cfg)
			awaitWaiter(t, srv, "k")
			first.silence()
			r := awaitRun(t, got)
			if r.code != ExitError || !errors.Is(r.err, latch.ErrSessionEnded) {
				t.Errorf("Run() = %d, %v; want %d and ErrSessionEnded", r.code, r.err, ExitError)
			}
			if exists(filepath.Join(dir, "ran")) {
				t.Error("the command ran")
			}
		})
	}
}

// A request retried after a failover waits only for what is left of -w:
// the keys stay busy, and latch run gives up when the first wait would
// have ended, not a whole -w after the retry.
func TestRunFailoverWaitDeadline(t *testing.T) {
	srv, addr := startServer(t)
	first, second := startNodeProxy(t, addr), startNodeProxy(t, addr)
	holdKey(t, addr, "k")
	const wait = 3 * time.Second
	cfg := testConfig(first.addr+","+second.addr, "k", "true")
	cfg.Wait = wait
	cfg.SessionTTL, cfg.KillAfter = 3*time.Second, 100*time.Millisecond
	logs := newLogRecorder()
	cfg.Logger = slog.New(logs)
	start := time.Now()
	got := startRun(context.Background(), cfg)
	awaitWaiter(t, srv, "k")
	first.silence() // found silent about 1.5s later
	r := awaitRun(t, got)
	elapsed := time.Since(start)
	var busy *latch.BusyError
	if r.code != ExitConflict || !errors.As(r.err, &busy) || !errors.Is(r.err, latch.ErrTimeout) {
		t.Fatalf("Run() = %d, %v; want %d and a timeout", r.code, r.err, ExitConflict)
	}
	if !logs.has(retryMsg) {
		t.Errorf("no %q in the log", retryMsg)
	}
	if elapsed > wait+time.Second {
		t.Errorf("Run returned %v after it started, want about the wait %v", elapsed, wait)
	}
}
