package dlock

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
)

func TestMain(m *testing.M) {
	if v := os.Getenv("LATCH_DLOCK_LOOPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "LATCH_DLOCK_LOOPS=%q: %v\n", v, err)
			os.Exit(2)
		}
		testLoops = n
	}
	goleak.VerifyTestMain(m)
}

// testLoops is the tests' Config.Loops: by default, event loops serve the
// TCP connections of the tests' servers (in memory: latch.Inline), as they
// do for latch serve; LATCH_DLOCK_LOOPS=-1 runs the suite on a goroutine
// per connection. Over pipes and TLS, a goroutine serves each connection
// whatever it says.
var testLoops int

// testTimeout bounds every wait of a test for an answer, so that a bug
// fails the test instead of hanging it. It is not a speed assertion.
const testTimeout = 20 * time.Second

// env is a dlock server over an in-process lock service.
type env struct {
	svc  *node.Node
	srv  *Server
	addr string        // TCP address, or "" over pipes
	pl   *pipeListener // over pipes
}

// testConfig is the configuration of the tests' servers: defaults with a
// small key limit and no idle timeout unless a test sets one.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.IdleTimeout = 0
	cfg.Loops = testLoops
	return cfg
}

// newEnv starts a server on a free loopback port. modify, when not nil,
// changes the configuration first. The server and service shut down when
// the test ends.
func newEnv(t testing.TB, modify func(*Config)) *env {
	t.Helper()
	cfg := testConfig()
	if modify != nil {
		modify(&cfg)
	}
	e := &env{svc: nodeFor(cfg)}
	srv, err := New(e.svc, cfg)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	e.srv = srv
	if err := srv.Start(); err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	e.addr = srv.Addr().String()
	t.Cleanup(e.shutdown)
	return e
}

// newPipeEnv starts a server that accepts in-memory connections (net.Pipe),
// for tests inside a synctest bubble, where time is fake.
func newPipeEnv(t *testing.T, modify func(*Config)) *env {
	t.Helper()
	return newPipeEnvTB(t, modify)
}

// nodeFor returns a lock service with cfg's key limit.
func nodeFor(cfg Config) *node.Node {
	n, err := node.New(node.Config{MaxKeys: cfg.MaxKeys})
	if err != nil {
		panic(err) // a valid configuration
	}
	return n
}

// shutdown stops the service, then the server, as internal/server does.
func (e *env) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	e.svc.Shutdown(ctx)
	if err := e.srv.Shutdown(ctx); err != nil {
		panic(fmt.Sprintf("dlock Shutdown() error = %v", err))
	}
}

// pipeListener is a net.Listener of net.Pipe connections.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial() (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// client is a test client: it writes raw frames and reads responses.
type client struct {
	t  testing.TB
	nc net.Conn
	fr *frame.Reader
}

// dial connects a client to the env's server.
func (e *env) dial(t testing.TB) *client {
	t.Helper()
	var nc net.Conn
	var err error
	if e.pl != nil {
		nc, err = e.pl.dial()
	} else {
		nc, err = net.Dial("tcp", e.addr)
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, fr: frame.NewReader(bufio.NewReader(nc), 0)}
}

// peer returns the client's address as the server sees it.
func (c *client) peer() string { return c.nc.LocalAddr().String() }

// send writes bytes as they are (one or more frames, or anything).
func (c *client) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// sendMsg writes one frame holding m.
func (c *client) sendMsg(m []byte) { c.t.Helper(); c.send(frame.Append(nil, m)) }

// sendPB writes one frame holding a Request built with the generated code
// (version 3 tests only).
func (c *client) sendPB(req *pb.Request) {
	c.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendMsg(b)
}

// recvRaw reads the next frame.
func (c *client) recvRaw() ([]byte, error) {
	d := testTimeout
	if c.nc.LocalAddr().Network() == "pipe" {
		d = 24 * time.Hour // fake time in a synctest bubble
	}
	c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := c.fr.Read()
	return b, err
}

// recv reads and decodes the next response by hand.
func (c *client) recv() resp {
	c.t.Helper()
	b, err := c.recvRaw()
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	r, err := decodeResp(b)
	if err != nil {
		c.t.Fatalf("decoding response % x: %v", b, err)
	}
	return r
}

// recvPB reads the next response and decodes it with the generated code.
func (c *client) recvPB() *pb.Response {
	c.t.Helper()
	b, err := c.recvRaw()
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	r := new(pb.Response)
	if err := proto.Unmarshal(b, r); err != nil {
		c.t.Fatalf("decoding response % x: %v", b, err)
	}
	return r
}

// expectEOF reads until the server closes the connection, failing on any
// response.
func (c *client) expectEOF() {
	c.t.Helper()
	b, err := c.recvRaw()
	if err == nil {
		r, _ := decodeResp(b)
		c.t.Fatalf("got response %+v, want the connection closed", r)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
		c.t.Fatalf("read error %v, want EOF", err)
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || errors.Is(err, io.ErrClosedPipe))
}

// reset closes the connection with an RST (SO_LINGER 0).
func (c *client) reset() {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.nc.Close()
}

// The hand-built protocol: field numbers and wire types as published by
// temoto/dlock (dlock.md section 2.2), encoded with protowire, not with the
// generated code.

// Request fields.
const (
	fReqVersion     = 1
	fReqID          = 2
	fReqAccessToken = 3
	fReqType        = 4
	fReqLock        = 51
)

// RequestLock fields.
const (
	fLockWait    = 1
	fLockRelease = 2
	fLockKeys    = 3
)

// Response fields.
const (
	fRespVersion  = 1
	fRespID       = 2
	fRespStatus   = 3
	fRespText     = 4
	fRespKeys     = 5
	fRespUnixTime = 6
)

// Request types and response statuses of version 2.
const (
	tInvalid = 0
	tPing    = 1
	tLock    = 2
	tUnlock  = 3

	sOk             = 0
	sGeneral        = 1
	sVersion        = 2
	sInvalidType    = 3
	sTooManyKeys    = 100
	sAcquireTimeout = 120
)

// msg is a protobuf message under construction.
type msg []byte

func (m msg) varint(num protowire.Number, v uint64) msg {
	m = protowire.AppendTag(m, num, protowire.VarintType)
	return protowire.AppendVarint(m, v)
}

func (m msg) bytes(num protowire.Number, b []byte) msg {
	m = protowire.AppendTag(m, num, protowire.BytesType)
	return protowire.AppendBytes(m, b)
}

func (m msg) str(num protowire.Number, s string) msg { return m.bytes(num, []byte(s)) }

// v2 builds a version 2 request: version 2, id, type.
func v2(id uint64, typ uint64) msg {
	return msg(nil).varint(fReqVersion, 2).varint(fReqID, id).varint(fReqType, typ)
}

// lockArg builds a RequestLock.
func lockArg(wait, release uint64, keys ...string) msg {
	var m msg
	if wait != 0 {
		m = m.varint(fLockWait, wait)
	}
	if release != 0 {
		m = m.varint(fLockRelease, release)
	}
	for _, k := range keys {
		m = m.str(fLockKeys, k)
	}
	return m
}

// v2Lock builds a version 2 Lock request.
func v2Lock(id, wait, release uint64, keys ...string) msg {
	return v2(id, tLock).bytes(fReqLock, lockArg(wait, release, keys...))
}

// v2Unlock builds a version 2 Unlock request.
func v2Unlock(id uint64, keys ...string) msg {
	return v2(id, tUnlock).bytes(fReqLock, lockArg(0, 0, keys...))
}

// field is one field of a decoded message, in wire order.
type field struct {
	num protowire.Number
	val any // uint64 or string
}

// resp is a Response decoded by hand.
type resp struct {
	fields   []field // every field, in wire order
	version  uint64
	id       uint64
	status   uint64
	text     string
	keys     []string
	unixTime int64
}

func decodeResp(b []byte) (resp, error) {
	var r resp
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, protowire.ParseError(n)
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, protowire.ParseError(n)
			}
			b = b[n:]
			r.fields = append(r.fields, field{num, v})
			switch num {
			case fRespVersion:
				r.version = v
			case fRespID:
				r.id = v
			case fRespStatus:
				r.status = v
			case fRespUnixTime:
				r.unixTime = int64(v)
			}
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return r, protowire.ParseError(n)
			}
			b = b[n:]
			r.fields = append(r.fields, field{num, string(v)})
			switch num {
			case fRespText:
				r.text = string(v)
			case fRespKeys:
				r.keys = append(r.keys, string(v))
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return r, protowire.ParseError(n)
			}
			b = b[n:]
			r.fields = append(r.fields, field{num, fmt.Sprintf("wire type %d", typ)})
		}
	}
	return r, nil
}

// shape is the response's fields with server_unix_time masked and
// error_text reduced to whether it is there: what the reference's frames
// are compared on.
func (r resp) shape() string {
	var sb strings.Builder
	for _, f := range r.fields {
		switch {
		case f.num == fRespUnixTime:
			sb.WriteString("6:<t> ")
		case f.num == fRespText:
			sb.WriteString("4:<text> ")
		default:
			fmt.Fprintf(&sb, "%d:%v ", f.num, f.val)
		}
	}
	return strings.TrimSpace(sb.String())
}

// hexFrame decodes a frame written as in dlock.md (hex, spaces ignored).
func hexFrame(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.ReplaceAll(s, " ", "")
	b := make([]byte, len(s)/2)
	for i := range b {
		if _, err := fmt.Sscanf(s[2*i:2*i+2], "%02x", &b[i]); err != nil {
			t.Fatalf("bad hex %q: %v", s, err)
		}
	}
	if n := binary.BigEndian.Uint32(b); int(n) != len(b)-4 {
		t.Fatalf("frame %q: header says %d bytes, has %d", s, n, len(b)-4)
	}
	return b
}

// waitFor polls the lock table until cond holds on key's state; it is how
// tests learn that a request is queued, without sleeping a guessed time.
func (e *env) waitFor(t testing.TB, key string, what string, cond func(latch.KeyInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		info, _ := e.svc.Lock(key)
		if cond(info) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q: %s never happened; state %+v", key, what, info)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waiters returns a condition: key has n waiters.
func waiters(n int) func(latch.KeyInfo) bool {
	return func(ki latch.KeyInfo) bool { return len(ki.Waiters) == n }
}

// heldBy returns a condition: the peer holds key.
func heldBy(peer string) func(latch.KeyInfo) bool {
	return func(ki latch.KeyInfo) bool {
		for _, h := range ki.Holders {
			if h.Peer == peer {
				return true
			}
		}
		return false
	}
}

// free: nobody holds key.
func free(ki latch.KeyInfo) bool { return len(ki.Holders) == 0 }

// waitConn polls the server side of client c until cond holds on it (read
// under the connection's mutex).
func (e *env) waitConn(t testing.TB, c *client, what string, cond func(*conn) bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		var sc *conn
		e.srv.ns.Range(func(nc *netserve.Conn) bool {
			if x, ok := nc.State().(*conn); ok && x.peer == c.peer() {
				sc = x
			}
			return true
		})
		if sc != nil {
			sc.mu.Lock()
			ok := cond(sc)
			sc.mu.Unlock()
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %s: %s never happened", c.peer(), what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// looped reports whether an event loop serves the server's side of client
// c.
func (e *env) looped(t testing.TB, c *client) bool {
	t.Helper()
	var lc bool
	e.waitConn(t, c, "the connection served", func(sc *conn) bool {
		lc = sc.lc != nil
		return true
	})
	return lc
}
