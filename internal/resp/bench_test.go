package resp

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// benchConn is a net.Conn that serves a request stream, the same bytes over
// and over until the benchmark's count of them, and counts what is written.
type benchConn struct {
	net.Conn // nil: the methods below are the ones used
	req      []byte
	off      int
	left     int // streams still to serve
	chunk    int // bytes per Read at most: a client's batch
	written  int
}

func (b *benchConn) Read(p []byte) (int, error) {
	if b.off == len(b.req) {
		if b.left == 0 {
			return 0, io.EOF
		}
		b.left--
		b.off = 0
	}
	n := copy(p[:min(len(p), b.chunk)], b.req[b.off:])
	b.off += n
	return n, nil
}

func (b *benchConn) Write(p []byte) (int, error) { b.written += len(p); return len(p), nil }
func (b *benchConn) Close() error                { return nil }
func (b *benchConn) SetReadDeadline(time.Time) error {
	return nil
}
func (b *benchConn) SetWriteDeadline(time.Time) error { return nil }
func (b *benchConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// benchCycles returns a request stream of SET NX PX and compare-and-delete
// (EVALSHA) cycles over keys keys, as redis-benchmark sends them.
func benchCycles(keys int) []byte {
	var buf bytes.Buffer
	const value = "owner-value-0123456789"
	for i := range keys {
		key := fmt.Sprintf("lock:%012d", i)
		for _, args := range [][]string{
			{"SET", key, value, "NX", "PX", "10000"},
			{"EVALSHA", "b70c2384248f88e6b75b9f89241a180f856ad852", "1", key, value},
		} {
			fmt.Fprintf(&buf, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(&buf, "$%d\r\n%s\r\n", len(a), a)
			}
		}
	}
	return buf.Bytes()
}

// BenchmarkCycle: one connection's SET NX PX + compare-and-delete cycles
// through the whole Redis path but the socket (parsing, the node's lock
// table, replies), unpipelined (one request per read) and 16 in flight,
// served by a goroutine (serve) and by an event loop (Input). One op is
// one cycle: two requests.
func BenchmarkCycle(b *testing.B) {
	for _, loop := range []bool{false, true} {
		for _, pipe := range []int{1, 16} {
			name := fmt.Sprintf("p%d", pipe)
			if loop {
				name = "loop-" + name
			}
			b.Run(name, func(b *testing.B) { benchCycle(b, pipe, loop) })
		}
	}
}

func benchCycle(b *testing.B, pipe int, loop bool) {
	_, s := newMemServer(b)
	// As scripts/bench-redis.sh, SCRIPT LOAD the documentation's
	// compare-and-delete (known by its canonical form only).
	doc := []byte(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)
	s.load(scriptSHA(doc), recognise(doc), doc)
	const keys = 1000
	req := benchCycles(keys)
	// One read per request (p1), or 16 requests per read.
	chunk := len(req) / (2 * keys) * pipe
	nc := &benchConn{req: req, chunk: chunk, left: b.N / keys}
	b.ReportAllocs()
	b.ResetTimer()
	if !loop {
		s.ns.ServeNetConn(nc)
	} else {
		serveLoop(newLoopConn(s, nc.RemoteAddr()), nc)
	}
	b.StopTimer()
	if want := (b.N/keys + 1) * keys * len("+OK\r\n:1\r\n"); nc.written != want {
		b.Fatalf("wrote %d bytes, want %d", nc.written, want)
	}
}

// serveLoop serves nc's requests on c as an event loop does: each read
// given to Input after what the previous call left, each reply written.
func serveLoop(c *conn, nc *benchConn) {
	buf := make([]byte, 64<<10)
	var in, out []byte
	for {
		k, err := nc.Read(buf)
		if err != nil {
			return
		}
		in = append(in, buf[:k]...)
		var used int
		out, used, _ = c.Input(in, out[:0])
		nc.Write(out)
		in = in[:copy(in, in[used:])]
	}
}

// BenchmarkScriptCycle: SET NX PX + release-by-script cycles, as
// BenchmarkCycle's event-loop case, with the documentation's
// compare-and-delete run by the known-script table (table), the same
// script run in Lua with the table's lookup turned off (lua), and a
// one-word variant the table does not know, run in Lua (unknown).
func BenchmarkScriptCycle(b *testing.B) {
	doc := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	variant := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("unlink",KEYS[1]) else return 0 end`
	for _, tc := range []struct {
		name   string
		script string
		lua    bool
	}{{"table", doc, false}, {"lua", doc, true}, {"unknown", variant, false}} {
		for _, pipe := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s-p%d", tc.name, pipe), func(b *testing.B) {
				_, s := newMemServer(b)
				s.noTemplates = tc.lua
				body := []byte(tc.script)
				if t := recognise(body); t != tmplNone {
					s.load(scriptSHA(body), t, body)
				}
				if _, err := s.lua.Load(body); err != nil {
					b.Fatal(err)
				}
				const keys = 1000
				req := bytes.ReplaceAll(benchCycles(keys), []byte("b70c2384248f88e6b75b9f89241a180f856ad852"), []byte(scriptSHA(body)))
				chunk := len(req) / (2 * keys) * pipe
				nc := &benchConn{req: req, chunk: chunk, left: b.N / keys}
				c := newLoopConn(s, nc.RemoteAddr())
				b.ReportAllocs()
				b.ResetTimer()
				serveLoop(c, nc)
				b.StopTimer()
				if want := (b.N/keys + 1) * keys * len("+OK\r\n:1\r\n"); nc.written != want {
					b.Fatalf("wrote %d bytes, want %d", nc.written, want)
				}
			})
		}
	}
}

// BenchmarkScriptRelease: releases by a script the table does not know
// (run in Lua), 16 in flight, as scripts/bench-redis.sh's release-lua run:
// pipelined scripts run as batches, over a table of 100,000 held keys
// (redis-benchmark's -r 100000) in random order, so that a release finds
// its key where a server under that load does, out of the cache. Each
// batch of 16 releases is followed by the 16 acquires (SET NX PX) that
// take its keys again, so that the table stays full: one op is one
// release and one acquire.
func BenchmarkScriptRelease(b *testing.B) {
	_, s := newMemServer(b)
	body := []byte(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("unlink",KEYS[1]) else return 0 end`)
	if _, err := s.lua.Load(body); err != nil {
		b.Fatal(err)
	}
	sha := scriptSHA(body)
	c := newLoopConn(s, new(benchConn).RemoteAddr())
	const (
		value = "owner-value-0123456789"
		keys  = 100_000
		pipe  = 16
	)
	acquire := func(dst []byte, key string) []byte {
		return fmt.Appendf(dst, "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n60000\r\n", len(key), key, len(value), value)
	}
	release := func(dst []byte, key string) []byte {
		return fmt.Appendf(dst, "*5\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", sha, len(key), key, len(value), value)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var fill []byte
	for _, i := range rng.Perm(keys) {
		fill = acquire(fill, fmt.Sprintf("lock:%012d", i))
	}
	out, _, _ := c.Input(fill, nil)
	if want := keys * len("+OK\r\n"); len(out) != want {
		b.Fatalf("acquire: %d bytes of replies, want %d", len(out), want)
	}
	// The batches: each a run of pipe releases, then one of pipe acquires.
	var batches [][]byte
	order := rng.Perm(keys)
	for i := 0; i+pipe <= keys; i += pipe {
		var rel, acq []byte
		for _, k := range order[i : i+pipe] {
			key := fmt.Sprintf("lock:%012d", k)
			rel, acq = release(rel, key), acquire(acq, key)
		}
		batches = append(batches, rel, acq)
	}
	want := pipe * (len(":1\r\n") + len("+OK\r\n"))
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += pipe {
		at := n / pipe % (len(batches) / 2) * 2
		written := 0
		for _, in := range batches[at : at+2] {
			var used int
			out, used, _ = c.Input(in, out[:0])
			if used != len(in) {
				b.Fatalf("batch used %d bytes of %d", used, len(in))
			}
			written += len(out)
		}
		if written != want {
			b.Fatalf("batch: %d bytes of replies, want %d", written, want)
		}
	}
}
