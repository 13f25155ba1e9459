package memcache

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// benchConn is a net.Conn that serves head once, then body n times, then
// EOF, and discards what the server writes. In pipelined mode each Read
// fills the buffer it is given, so the server sees deep pipelines and
// flushes once per buffer; otherwise each Read returns one body, so every
// request is flushed on its own.
type benchConn struct {
	head, body []byte
	n          int
	pipelined  bool
	cur        []byte
	written    int64
}

func (c *benchConn) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if len(c.cur) == 0 {
			switch {
			case c.head != nil:
				c.cur, c.head = c.head, nil
			case c.n > 0:
				c.cur = c.body
				c.n--
			default:
				if total > 0 {
					return total, nil
				}
				return 0, io.EOF
			}
		}
		k := copy(p, c.cur)
		c.cur, p, total = c.cur[k:], p[k:], total+k
		if !c.pipelined && len(c.cur) == 0 {
			break
		}
	}
	return total, nil
}

func (c *benchConn) Write(p []byte) (int, error) {
	c.written += int64(len(p))
	return len(p), nil
}

func (c *benchConn) Close() error { return nil }
func (c *benchConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 11211}
}
func (c *benchConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *benchConn) SetDeadline(time.Time) error      { return nil }
func (c *benchConn) SetReadDeadline(time.Time) error  { return nil }
func (c *benchConn) SetWriteDeadline(time.Time) error { return nil }

// benchServe serves b.N copies of body (after head) on one connection of a
// fresh server and reports the bytes of replies per body.
func benchServe(b *testing.B, head, body []byte, pipelined bool) {
	ts := newTestServer(b)
	nc := &benchConn{head: head, body: body, n: b.N, pipelined: pipelined}
	c := serveOne{ts.srv, nc}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	c.serve()
	b.StopTimer()
	b.ReportMetric(float64(nc.written)/float64(max(b.N, 1)), "reply-B/op")
}

// benchLoop is benchServe for a connection served by an event loop: each
// call of Input is given one body, or (pipelined) 16.
func benchLoop(b *testing.B, head, body []byte, pipelined bool) {
	ts := newTestServer(b)
	c := newLoopConn(ts.srv, pipeAddr{})
	defer c.Closed(io.EOF)
	var out []byte
	if len(head) > 0 {
		out, _, _ = c.Input(head, out[:0])
	}
	batch, per := body, 1
	if pipelined {
		batch, per = bytes.Repeat(body, 16), 16
	}
	written := 0
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += per {
		var used int
		out, used, _ = c.Input(batch, out[:0])
		if used != len(batch) {
			b.Fatalf("Input consumed %d of %d bytes", used, len(batch))
		}
		written += len(out)
	}
	b.StopTimer()
	b.ReportMetric(float64(written)/float64(max(b.N, 1)), "reply-B/op")
}

var benchValue = bytes.Repeat([]byte("v"), 100)

// textSet is a set of benchValue.
func benchTextSet(key string) []byte {
	return []byte("set " + key + " 0 0 " + strconv.Itoa(len(benchValue)) + "\r\n" + string(benchValue) + "\r\n")
}

// binReq encodes a binary request.
func benchBinReq(op byte, key string, extras, value []byte) []byte {
	h := make([]byte, headerLen)
	h[0], h[1] = magicRequest, op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], 0xdeadbeef)
	return append(append(append(h, extras...), key...), value...)
}

func benchBinSet(key string) []byte { return benchBinReq(opSet, key, make([]byte, 8), benchValue) }

// BenchmarkServeText measures the text protocol path of one connection:
// parsing, executing and encoding replies, with no network. One op is one
// body: a request, or a lock+unlock pair.
func BenchmarkServeText(b *testing.B) {
	cases := []struct {
		name       string
		head, body []byte
	}{
		{"get", benchTextSet("key:42"), []byte("get key:42\r\n")},
		{"get-miss", nil, []byte("get key:42\r\n")},
		{"set", nil, benchTextSet("key:42")},
		{"lock-unlock", benchTextSet("key:42"), []byte("lock key:42\r\nunlock key:42\r\n")},
		{"add-delete", nil, []byte("add key:42 0 60 1\r\nx\r\ndelete key:42\r\n")},
	}
	for _, tc := range cases {
		for _, pipelined := range []bool{true, false} {
			b.Run(tc.name+benchMode(pipelined), func(b *testing.B) { benchServe(b, tc.head, tc.body, pipelined) })
			b.Run(tc.name+benchMode(pipelined)+"/loop", func(b *testing.B) { benchLoop(b, tc.head, tc.body, pipelined) })
		}
	}
}

// BenchmarkServeBinary is BenchmarkServeText for the binary protocol.
func BenchmarkServeBinary(b *testing.B) {
	cases := []struct {
		name       string
		head, body []byte
	}{
		{"get", benchBinSet("key:42"), benchBinReq(opGet, "key:42", nil, nil)},
		{"get-miss", nil, benchBinReq(opGet, "key:42", nil, nil)},
		{"set", nil, benchBinSet("key:42")},
		{"lock-unlock", benchBinSet("key:42"), append(benchBinReq(opLock, "key:42", nil, nil), benchBinReq(opUnlock, "key:42", nil, nil)...)},
		{"add-delete", nil, append(benchBinReq(opAdd, "key:42", []byte{0, 0, 0, 0, 0, 0, 0, 60}, []byte("x")), benchBinReq(opDelete, "key:42", nil, nil)...)},
	}
	for _, tc := range cases {
		for _, pipelined := range []bool{true, false} {
			b.Run(tc.name+benchMode(pipelined), func(b *testing.B) { benchServe(b, tc.head, tc.body, pipelined) })
			b.Run(tc.name+benchMode(pipelined)+"/loop", func(b *testing.B) { benchLoop(b, tc.head, tc.body, pipelined) })
		}
	}
}

func benchMode(pipelined bool) string {
	if pipelined {
		return "/pipelined"
	}
	return "/one-by-one"
}

// TestBenchConn checks the benchmarks' replies, so that a benchmark never
// measures an error path.
func TestBenchConn(t *testing.T) {
	tests := []struct {
		name       string
		head, body []byte
		n          int
		want       string
	}{
		{"text get", benchTextSet("k"), []byte("get k\r\n"), 2, "STORED\r\n" + "VALUE k 0 100\r\n" + string(benchValue) + "\r\nEND\r\n" + "VALUE k 0 100\r\n" + string(benchValue) + "\r\nEND\r\n"},
		{"text lock-unlock", benchTextSet("k"), []byte("lock k\r\nunlock k\r\n"), 2, "STORED\r\nOK\r\nOK\r\nOK\r\nOK\r\n"},
		{"text add-delete", nil, []byte("add k 0 60 1\r\nx\r\ndelete k\r\n"), 2, "STORED\r\nDELETED\r\nSTORED\r\nDELETED\r\n"},
	}
	for _, tt := range tests {
		for _, pipelined := range []bool{true, false} {
			t.Run(tt.name+benchMode(pipelined), func(t *testing.T) {
				ts := newTestServer(t)
				var out bytes.Buffer
				nc := &benchRecordConn{benchConn: benchConn{head: tt.head, body: tt.body, n: tt.n, pipelined: pipelined}, out: &out}
				c := serveOne{ts.srv, nc}
				c.serve()
				if out.String() != tt.want {
					t.Errorf("replies %q, want %q", out.String(), tt.want)
				}
			})
		}
	}
	t.Run("binary lock-unlock", func(t *testing.T) {
		ts := newTestServer(t)
		var out bytes.Buffer
		body := append(benchBinReq(opLock, "k", nil, nil), benchBinReq(opUnlock, "k", nil, nil)...)
		nc := &benchRecordConn{benchConn: benchConn{head: benchBinSet("k"), body: body, n: 3, pipelined: true}, out: &out}
		c := serveOne{ts.srv, nc}
		c.serve()
		got := out.Bytes()
		if len(got) != 7*headerLen {
			t.Fatalf("%d bytes of replies, want 7 headers", len(got))
		}
		for i := 0; i < len(got); i += headerLen {
			if st := binary.BigEndian.Uint16(got[i+6:]); st != stOK {
				t.Errorf("reply %d: status 0x%04x", i/headerLen, st)
			}
		}
	})
}

// benchRecordConn is a benchConn that keeps what the server writes.
type benchRecordConn struct {
	benchConn
	out *bytes.Buffer
}

func (c *benchRecordConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// BenchmarkItemLockUnlock measures the service's lock and unlock of an
// item (one command each), the memcached lock path without parsing or I/O,
// cycling over the items of a cache of 1 or 100k, as latch bench's cycle
// workload does. 100k items are far more than the CPU's caches hold, so the
// first touch of an item (its slot in the item map, its key, its record)
// misses them.
func BenchmarkItemLockUnlock(b *testing.B) {
	for _, n := range []int{1, 100_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			ts := newTestServer(b)
			sess, err := ts.svc.OpenSession(latch.SessionOptions{Protocol: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			var c fsm.Command
			keys := make([][]byte, n)
			for i := range keys {
				keys[i] = []byte("key:" + strconv.Itoa(i))
				c = fsm.Command{Op: fsm.OpItemSet, Key: keys[i], Value: []byte("x")}
				if err := ts.svc.Do(nil, &c).Err; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c = fsm.Command{Op: fsm.OpItemLock, Key: keys[i]}
				if err := ts.svc.Do(sess, &c).Err; err != nil {
					b.Fatal(err)
				}
				c = fsm.Command{Op: fsm.OpItemUnlock, Key: keys[i]}
				if err := ts.svc.Do(sess, &c).Err; err != nil {
					b.Fatal(err)
				}
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
