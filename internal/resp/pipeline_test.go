package resp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/node"
)

// countingService counts the commands a Service is asked to apply.
type countingService struct {
	Service
	owned atomic.Int64
}

func (s *countingService) Owned(c *fsm.Command) fsm.Result {
	s.owned.Add(1)
	return s.Service.Owned(c)
}

// chunkConn serves its input in the chunks given, one per Read.
type chunkConn struct {
	benchConn
	chunks [][]byte
	out    bytes.Buffer
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *chunkConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// TestPipelinedBatches: pipelined requests answer exactly as the same
// requests sent one at a time, however their bytes arrive, and the lock
// commands among them are applied in fewer commands of the service.
func TestPipelinedBatches(t *testing.T) {
	doc := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	reqs := [][]string{
		{"SET", "a", "x", "NX", "PX", "10000"},
		{"SET", "a", "y", "NX", "PX", "10000"},
		{"SET", "b", "y", "NX"},
		{"SETNX", "c", "z"},
		{"PEXPIRE", "c", "5000"},
		{"GET", "a"},
		{"PTTL", "b"},
		{"EVAL", doc, "1", "a", "y"},
		{"EVAL", doc, "1", "a", "x"},
		{"EVALSHA", scriptSHA([]byte(doc)), "1", "b", "y"},
		{"SET", "d", strings.Repeat("v", 5000), "NX"},
		{"SET", "bad key", "v", "NX"},
		{"NOSUCH", "x"},
		{"SET", "e", "v", "NX"},
		{"GETSET", "e", "w"},
		{"PING"},
		{"SET", "f", "v", "NX", "PX", "x"},
		{"DEL", "c", "d", "e"},
		{"SET", "g", "v", "NX"},
		{"MULTI"},
		{"SET", "g", "w"},
		{"EXEC"},
		{"ECHO", "end"},
		{"EXISTS", "a", "b", "c", "g"},
	}
	var enc [][]byte
	for _, r := range reqs {
		var b bytes.Buffer
		fmt.Fprintf(&b, "*%d\r\n", len(r))
		for _, a := range r {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		enc = append(enc, b.Bytes())
	}
	// The inline form of one request, amid the others.
	enc[15] = []byte("PING\r\n")
	all := bytes.Join(enc, nil)

	// One request per read: nothing is ever buffered behind a request.
	want, one := serveChunks(t, enc, false)
	for _, loop := range []bool{false, true} {
		for _, size := range []int{1, 7, 100, 4096, len(all)} {
			var chunks [][]byte
			for rest := all; len(rest) > 0; {
				n := min(size, len(rest))
				chunks = append(chunks, rest[:n])
				rest = rest[n:]
			}
			got, owned := serveChunks(t, chunks, loop)
			if got != want {
				t.Errorf("in chunks of %d bytes (event loop %v):\n%q\nwant (one request per read)\n%q", size, loop, got, want)
			}
			if size == len(all) && owned >= one {
				t.Errorf("the whole pipeline at once took %d lock commands (event loop %v), one request per read %d: no batch", owned, loop, one)
			}
		}
	}
	for _, w := range []string{"+OK\r\n$-1\r\n+OK\r\n:1\r\n:1\r\n$1\r\nx\r\n", "-ERR latch: value of 5000 bytes", "-ERR unknown command 'NOSUCH'", "$3\r\nend\r\n:1\r\n"} {
		if !strings.Contains(want, w) {
			t.Errorf("replies lack %q:\n%q", w, want)
		}
	}
}

// serveChunks serves chunks, the reads of one connection, on a new node in
// memory, and returns the replies and the number of lock commands the
// node applied. The connection is served by its own goroutine's loop
// (serve), or as an event loop serves it (loop: Input, given each read
// after what the previous call left unconsumed).
func serveChunks(t *testing.T, chunks [][]byte, loop bool) (string, int64) {
	t.Helper()
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(context.Background())
	svc := &countingService{Service: n}
	cfg := DefaultConfig()
	cfg.MaxValue = 4096
	s, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !loop {
		nc := &chunkConn{chunks: chunks}
		s.ns.ServeNetConn(nc)
		return uncounted(nc.out.String()), svc.owned.Load()
	}
	c := newLoopConn(s, new(benchConn).RemoteAddr())
	var out, rest []byte
	for _, chunk := range chunks {
		in := append(rest, chunk...)
		var used int
		var open bool
		out, used, open = c.Input(in, out)
		rest = append([]byte(nil), in[used:]...)
		if !open {
			break
		}
	}
	return uncounted(string(out)), svc.owned.Load()
}

// FuzzLoopInput: a connection served by an event loop answers exactly as
// one served by a goroutine of its own, however its input is cut into
// reads: an incomplete request is parsed again, whole, once more has
// arrived. Time stands still (synctest), so that TTLs and INFO agree.
// uncounted blanks INFO's count of connections: a goroutine's connection
// is counted by its server, one given to Input by the test is not.
func uncounted(replies string) string {
	return connectedClients.ReplaceAllString(replies, "connected_clients:N")
}

var connectedClients = regexp.MustCompile(`connected_clients:[0-9]+`)

func FuzzLoopInput(f *testing.F) {
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nx\r\nPING\r\n"), uint8(1))
	f.Add([]byte("SET a x NX PX 100\r\nSET a y NX\r\nPTTL a\r\nGET a\r\n"), uint8(3))
	f.Add([]byte("MULTI\r\nSET b v NX\r\nEXEC\r\nWATCH b\r\nGET b\r\nMULTI\r\nDEL b\r\nEXEC\r\n"), uint8(7))
	f.Add([]byte("EVAL \"return redis.call('del',KEYS[1])\" 1 k\r\nHELLO 3\r\nCLIENT INFO\r\nINFO\r\nQUIT\r\nPING\r\n"), uint8(5))
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$-5\r\n*1\r\n$4\r\nPING\r\n"), uint8(2))
	f.Add([]byte("EVAL \"return redis.call('set',KEYS[1],'v','NX')\" 1 s\r\nEVAL \"redis.call('del',KEYS[1]) error('x')\" 1 s\r\nEVAL_RO \"return redis.call('get',KEYS[1])\" 1 s\r\nGET s\r\nEVAL \"return 1\" x\r\n"), uint8(9))
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nab"), uint8(4))
	f.Add([]byte("HELLO 3\r\nCLIENT TRACKING ON\r\nGET a\r\nSET a x NX\r\nGET a\r\nMULTI\r\nGET a\r\nDEL a\r\nGET a\r\nEXEC\r\nDEL a\r\nPING\r\n"), uint8(6))
	f.Add([]byte("HELLO 3\r\nCLIENT TRACKING ON BCAST PREFIX a NOLOOP\r\nSET a1 x NX\r\nCLIENT TRACKINGINFO\r\nCLIENT TRACKING OFF\r\nCLIENT CACHING yes\r\n"), uint8(9))
	f.Add([]byte("CLIENT TRACKING ON OPTIN REDIRECT 1\r\nSUBSCRIBE __redis__:invalidate x\r\nCLIENT CACHING yes\r\nGET k\r\nSET k v NX\r\nPING\r\nUNSUBSCRIBE\r\nGETEX k PXAT 1\r\n"), uint8(11))
	f.Add([]byte("ZADD z 1 a 2 b\r\nZRANGE z 0 -1 WITHSCORES\r\nWATCH z\r\nMULTI\r\nZREM z a\r\nZCARD z\r\nEXEC\r\nZADD z INCR 1 b\r\nZRANGEBYSCORE z (1 +inf LIMIT 0 1\r\nPEXPIRE z 100\r\nTYPE z\r\nZSCORE z b\r\n"), uint8(6))
	f.Fuzz(func(t *testing.T, input []byte, cut uint8) {
		synctest.Test(t, func(t *testing.T) {
			want, _ := serveChunks(t, [][]byte{input}, false)
			var chunks [][]byte
			for rest := input; len(rest) > 0; {
				n := min(int(cut)+1, len(rest))
				chunks = append(chunks, rest[:n])
				rest = rest[n:]
			}
			got, _ := serveChunks(t, chunks, true)
			if got != want {
				t.Fatalf("input %q in reads of %d bytes: an event loop's connection answered\n%q\nits own goroutine's\n%q", input, int(cut)+1, got, want)
			}
		})
	})
}

// TestLongRequestParsedOnce: a long request arriving in many reads is
// parsed when it is whole, not again at every read (which would cost the
// square of its length).
func TestLongRequestParsedOnce(t *testing.T) {
	_, s := newMemServer(t)
	arg := strings.Repeat("v", 60<<10)
	var req bytes.Buffer
	fmt.Fprintf(&req, "*17\r\n$4\r\nECHO\r\n")
	for range 16 {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(arg), arg)
	}
	all := req.Bytes()
	c := newLoopConn(s, new(benchConn).RemoteAddr())
	var out, rest []byte
	parsed := 0
	for chunk := range slices.Chunk(all, 1<<10) {
		in := append(rest, chunk...)
		var used int
		out, used, _ = c.Input(in, out[:0])
		parsed += c.in.Pos()
		rest = append(rest[:0], in[used:]...)
	}
	if !strings.HasPrefix(string(out), "-ERR wrong number of arguments") {
		t.Fatalf("replied %.80q", out)
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left unparsed", len(rest))
	}
	if parsed > 2*len(all) {
		t.Fatalf("a request of %d bytes in reads of 1 KiB: %d bytes parsed", len(all), parsed)
	}
}

// notCaughtUp is a node that cannot read yet: a replicated node that has
// not caught up with its cluster, and gave up waiting.
type notCaughtUp struct{ Service }

func (notCaughtUp) OwnedGet(string) (fsm.Result, int64) {
	return fsm.Result{Err: fmt.Errorf("get: shut down, before it caught up with its cluster: %w", latch.ErrUnavailable)}, 0
}

// TestWatchUnreadable: WATCH of a key the node cannot read answers the
// error, as GET does, rather than OK for a key it took for free.
func TestWatchUnreadable(t *testing.T) {
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(context.Background())
	s, err := New(notCaughtUp{n}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	nc := &chunkConn{chunks: [][]byte{[]byte("WATCH k\r\nGET k\r\n")}}
	s.ns.ServeNetConn(nc)
	const want = "-ERR get: shut down, before it caught up with its cluster: latch: cluster unavailable\r\n"
	if got := nc.out.String(); got != want+want {
		t.Errorf("WATCH, GET of a key the node cannot read:\n%q\nwant\n%q", got, want+want)
	}
}
