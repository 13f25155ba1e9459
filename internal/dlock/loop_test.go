package dlock

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
)

// fakeLoop is a connection's event loop as Input sees it (loopConn): it
// keeps what is sent, and reports a Resume on a channel.
type fakeLoop struct {
	mu      sync.Mutex
	sent    []byte
	closed  bool
	paused  bool
	resumes chan struct{}
}

func newFakeLoop() *fakeLoop { return &fakeLoop{resumes: make(chan struct{}, 1)} }

func (f *fakeLoop) Send(p []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.sent = append(f.sent, p...)
	return true
}

func (f *fakeLoop) Pause() { f.paused = true } // from Input, as evloop's

func (f *fakeLoop) Resume() {
	select {
	case f.resumes <- struct{}{}:
	default:
	}
}

// close makes later sends fail, as after the loop closed the connection,
// and returns what was sent.
func (f *fakeLoop) close() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return f.sent
}

// diffServer returns a server, not listening, over a fresh node whose
// tokens start at the same number every time, with cfg's limits; its log
// fails the test on an error.
func diffServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	svc, err := node.New(node.Config{MaxKeys: cfg.MaxKeys, FirstToken: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	cfg.Logger = slog.New(failOnError{t})
	s, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// failOnError is a slog handler that fails its test on an error record.
type failOnError struct{ t testing.TB }

func (h failOnError) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h failOnError) Handle(_ context.Context, r slog.Record) error {
	h.t.Errorf("logged an error: %s", r.Message)
	return nil
}
func (h failOnError) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h failOnError) WithGroup(string) slog.Handler      { return h }

// loopReplay gives input to a connection of s served as an event loop
// serves it, in the pieces cuts makes (ascending offsets), then ends it as
// the loop does when the client leaves, and returns what it sent.
func loopReplay(t testing.TB, s *Server, input []byte, cuts []int) []byte {
	t.Helper()
	c := newConn(s, new(netserve.Conn), "pipe")
	lc := newFakeLoop()
	c.attach(lc)
	var pending []byte
	prev := 0
	for _, cut := range append(cuts, len(input)) {
		if cut <= prev {
			continue
		}
		in := append(pending, input[prev:cut]...)
		prev = cut
		for {
			_, used, open := c.Input(in, nil)
			if !open {
				c.Closed(nil)
				return lc.close()
			}
			pending = append([]byte(nil), in[used:]...)
			if !lc.paused {
				break
			}
			// Stalled on a full version 2 queue: the queue's server
			// resumes it.
			select {
			case <-lc.resumes:
			case <-time.After(testTimeout):
				t.Fatal("a stalled connection was never resumed")
			}
			lc.paused = false
			in = pending
		}
	}
	c.Closed(io.EOF)
	return lc.close()
}

// serveReplay gives input to a connection of s served by its goroutine, in
// the pieces cuts makes, then the end of input, and returns its answers.
func serveReplay(s *Server, input []byte, cuts []int) []byte {
	nc := &scriptConn{in: input, cuts: cuts}
	s.ns.ServeNetConn(nc)
	return nc.out
}

// scriptConn is a net.Conn whose reads return its input, a piece at a
// time, then io.EOF, and whose writes are kept.
type scriptConn struct {
	in   []byte
	cuts []int // offsets in in where a read stops
	pos  int
	mu   sync.Mutex
	out  []byte
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if c.pos == len(c.in) {
		return 0, io.EOF
	}
	end := len(c.in)
	for _, cut := range c.cuts {
		if cut > c.pos {
			end = min(end, cut)
			break
		}
	}
	n := copy(p, c.in[c.pos:end])
	c.pos += n
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, p...)
	return len(p), nil
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// answers splits a connection's output into its frames, with the fields
// that tell the time (server_unix_time, lease_expires) zeroed: the version
// 2 answers in order, and the version 3 ones sorted, since a version 3
// answer that waited (on the connection's own session, here) may come
// before or after the answers to the requests read meanwhile. A frame that
// does not decode is kept as it is, among the version 2 ones.
func answers(t testing.TB, out []byte) (v2, v3 []string) {
	t.Helper()
	for len(out) > 0 {
		if len(out) < frame.HeaderSize {
			t.Fatalf("a partial frame header at the end: % x", out)
		}
		n := int(binary.BigEndian.Uint32(out))
		if len(out) < frame.HeaderSize+n {
			t.Fatalf("a partial frame at the end: % x", out)
		}
		body := out[frame.HeaderSize : frame.HeaderSize+n]
		out = out[frame.HeaderSize+n:]
		norm, version, ok := untimed(body)
		switch {
		case !ok:
			v2 = append(v2, fmt.Sprintf("undecoded % x", body))
		case version == 3:
			v3 = append(v3, string(norm))
		default:
			v2 = append(v2, string(norm))
		}
	}
	slices.Sort(v3)
	return v2, v3
}

// untimed returns the Response in b with its times zeroed, and its version.
func untimed(b []byte) (norm []byte, version uint64, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, 0, false
		}
		field := b[:n+m]
		b = b[n+m:]
		if typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(field[n:])
			switch num {
			case fRespVersion:
				version = v
			case fRespUnixTime, 8: // lease_expires
				field = protowire.AppendVarint(protowire.AppendTag(nil, num, typ), 0)
			}
		}
		norm = append(norm, field...)
	}
	return norm, version, true
}

// checkLoopAgrees replays input on a connection served by a goroutine and
// on one served as an event loop would, split at the cuts of each of
// splits, each on a fresh server with cfg, and fails unless every replay
// answers the same.
func checkLoopAgrees(t testing.TB, cfg Config, input []byte, splits [][]int) {
	t.Helper()
	want2, want3 := answers(t, serveReplay(diffServer(t, cfg), input, nil))
	for i, cuts := range splits {
		got2, got3 := answers(t, loopReplay(t, diffServer(t, cfg), input, cuts))
		if !slices.Equal(got2, want2) || !slices.Equal(got3, want3) {
			t.Fatalf("input % .300x cut at %.100v:\nevent loop answered v2 %q\n  v3 %q\ngoroutine answered  v2 %q\n  v3 %q", input, cuts, got2, got3, want2, want3)
		}
		if i%2 == 1 {
			// A goroutine reading the same pieces answers the same too.
			got2, got3 := answers(t, serveReplay(diffServer(t, cfg), input, cuts))
			if !slices.Equal(got2, want2) || !slices.Equal(got3, want3) {
				t.Fatalf("input % .300x cut at %.100v:\ngoroutine answered v2 %q v3 %q\nuncut, v2 %q v3 %q", input, cuts, got2, got3, want2, want3)
			}
		}
	}
}

// splitsOf returns ways to cut input: whole, at every byte, and a few at
// random from seed.
func splitsOf(input []byte, seed uint64) [][]int {
	every := make([]int, len(input))
	for i := range every {
		every[i] = i + 1
	}
	splits := [][]int{nil, every}
	r := rand.New(rand.NewPCG(seed, seed>>32|1))
	for range 3 {
		var cuts []int
		for i := 1; i < len(input); i++ {
			if r.IntN(8) == 0 {
				cuts = append(cuts, i)
			}
		}
		splits = append(splits, cuts)
	}
	return splits
}

// diffConfig is the configuration of the differential tests' servers:
// small limits, so that inputs reach them.
func diffConfig() Config {
	cfg := testConfig()
	cfg.MaxFrame = 4096
	cfg.MaxKeys = 8
	cfg.MaxPending = 8
	return cfg
}

// loopSeeds are inputs that reach the event loop's own paths: frames over
// the limit, and many frames in one piece.
func loopSeeds() [][]byte {
	var many []byte
	for i := range 300 {
		many = frame.Append(many, v2(uint64(i+1), tPing))
	}
	over := binary.BigEndian.AppendUint32(nil, 4097)
	return [][]byte{
		many,
		append(frame.Append(nil, v2(1, tPing)), over...),
		append(append(frame.Append(nil, v2(1, tPing)), over...), make([]byte, 4097)...),
		frame.Append(frame.Append(nil, v2Lock(1, 0, 0, "a")), v2Unlock(2, "a")),
	}
}

// TestLoopAgreesWithServe: an event loop's connection answers what a
// goroutine's answers, byte for byte but for the times, however the input
// is cut.
func TestLoopAgreesWithServe(t *testing.T) {
	for i, s := range append(connSeeds(), loopSeeds()...) {
		splits := splitsOf(s, uint64(i))
		if len(s) > 4<<10 {
			splits = [][]int{nil, splits[2]} // not every byte of the longest
		}
		checkLoopAgrees(t, diffConfig(), s, splits)
	}
}

// FuzzLoopAgreesWithServe is TestLoopAgreesWithServe for any input, cut at
// random: the loop's framing against the frame reader's.
func FuzzLoopAgreesWithServe(f *testing.F) {
	for i, s := range append(connSeeds(), loopSeeds()...) {
		f.Add(s, uint64(i))
	}
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, input []byte, seed uint64) {
		if timeDependent(input) {
			t.Skip("a duration short enough to lapse during the replay")
		}
		mu.Lock() // one replay at a time: the nodes' goroutines add up
		defer mu.Unlock()
		splits := splitsOf(input, seed)
		if len(input) > 256 {
			splits = append(splits[:1], splits[2:]...) // every byte: too slow to minimize
		}
		checkLoopAgrees(t, diffConfig(), input, splits)
	})
}

// timeDependent reports whether a request framed in input asks for a
// session TTL, lease or wait under a second, short enough to lapse while
// the replays run: their answers then depend on the clock (a session of
// 48 µs may be gone before the keepalive that opened it), not on how the
// input was read. TestLoopAgreesWithServe still runs the seeds that do,
// whose order of events does not depend on it.
func timeDependent(input []byte) bool {
	const short = uint64(time.Second / time.Microsecond)
	brief := func(us uint64) bool { return us > 0 && us < short }
	for len(input) >= 4 {
		n := binary.BigEndian.Uint32(input)
		if uint64(n) > uint64(len(input)-4) {
			return false
		}
		req, err := decodeRequest(input[4 : 4+n])
		input = input[4+n:]
		if err != nil {
			continue
		}
		l, s := req.GetLock(), req.GetSession()
		if brief(l.GetWaitMicro()) || brief(l.GetReleaseMicro()) || brief(s.GetTtlMicro()) {
			return true
		}
	}
	return false
}

// TestStalledQueue: version 2 requests that find the queue full while its
// server is busy (not parked in a Lock) wait for room: on a goroutine the
// reader waits, on an event loop the connection's input pauses until the
// queue's server resumes it. Every request is answered, in order.
func TestStalledQueue(t *testing.T) {
	const max = 4
	gate := make(chan struct{})
	testHookAnsweredV2 = func() { <-gate }
	t.Cleanup(func() { testHookAnsweredV2 = nil }) // after the server's shutdown
	e := newEnv(t, func(c *Config) { c.MaxPending = max })
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the shutdown, if the test fails first
	holder, c := e.dial(t), e.dial(t)
	lockOK(t, holder, 1, "k")
	// A Lock that waits starts the queue; the holder's Unlock grants it,
	// and the queue's server then stops at the gate, not parked.
	c.sendMsg(v2Lock(1, 0, 0, "k"))
	e.waitFor(t, "k", "the Lock to wait", waiters(1))
	holder.sendMsg(v2Unlock(2, "k"))
	if r := holder.recv(); r.status != sOk {
		t.Fatalf("Unlock: %s", r.shape())
	}
	if r := c.recv(); r.id != 1 || r.status != sOk {
		t.Fatalf("the waiting Lock: %s %q, want Ok", r.shape(), r.text)
	}
	const n = 3 * max
	var batch []byte
	for i := range n {
		batch = frame.Append(batch, v2(uint64(i+2), tPing))
	}
	c.send(batch)
	e.waitConn(t, c, "the queue full", func(sc *conn) bool {
		return len(sc.queue) == max && (sc.lc == nil || sc.stalled)
	})
	release()
	for i := range n {
		if r := c.recv(); r.id != uint64(i+2) || r.status != sOk {
			t.Fatalf("answer %d: %s %q, want request %d Ok", i, r.shape(), r.text, i+2)
		}
	}
	c.mustV3(v3(100, pb.RequestType_Ping), pb.ResponseStatus_Ok)
}
