package memcache

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The loop benchmarks serve latch bench's workloads from one event loop's
// point of view, without the kernel: loopConns connections of one server,
// served in turn, each call of Input given one request (p1) or 16 (p16),
// over 100k items, as scripts/bench-peers.sh runs them. 100k items are far
// more than the CPU's caches hold, so, as in the server, the first touch
// of an item in a while misses them; BenchmarkServeText and
// BenchmarkServeBinary, on one key, measure the code alone.

// loopConns and loopKeys are latch bench's defaults: 16 connections, a
// key space of 100k (cycle: split among the connections).
const (
	loopConns = 16
	loopKeys  = 100_000
)

// loopProto builds the requests of one protocol.
type loopProto struct {
	name         string
	set, get     func(key string) []byte
	lock, unlock func(key string) []byte
}

var loopProtos = []loopProto{
	{
		name:   "text",
		set:    benchTextSet,
		get:    func(k string) []byte { return []byte("get " + k + "\r\n") },
		lock:   func(k string) []byte { return []byte("lock " + k + "\r\n") },
		unlock: func(k string) []byte { return []byte("unlock " + k + "\r\n") },
	},
	{
		name:   "binary",
		set:    benchBinSet,
		get:    func(k string) []byte { return benchBinReq(opGet, k, nil, nil) },
		lock:   func(k string) []byte { return benchBinReq(opLock, k, nil, nil) },
		unlock: func(k string) []byte { return benchBinReq(opUnlock, k, nil, nil) },
	},
}

// loopInputs is the input of one connection: chunks of requests, each
// given to one call of Input, in turn.
type loopInputs struct {
	buf  []byte
	ends []int // chunk i is buf[ends[i-1]:ends[i]]
	next int
}

func (in *loopInputs) add(reqs ...[]byte) {
	for _, r := range reqs {
		in.buf = append(in.buf, r...)
	}
	in.ends = append(in.ends, len(in.buf))
}

func (in *loopInputs) chunk() []byte {
	start := 0
	if in.next > 0 {
		start = in.ends[in.next-1]
	}
	b := in.buf[start:in.ends[in.next]]
	if in.next++; in.next == len(in.ends) {
		in.next = 0
	}
	return b
}

// benchLoopConns serves the inputs on their connections of one fresh
// server, in turn, after setup (one input, on a connection of its own),
// until b.N ops were served: perOp requests each, in calls of perCall
// requests. It checks that every call consumed its input whole.
func benchLoopConns(b *testing.B, setup []byte, ins []*loopInputs, perCall, perOp int) {
	ts := newTestServer(b)
	var out []byte
	{
		c := newLoopConn(ts.srv, pipeAddr{})
		for len(setup) > 0 {
			var used int
			out, used, _ = c.Input(setup, out[:0])
			if used == 0 {
				b.Fatal("setup: Input consumed nothing")
			}
			setup = setup[used:]
		}
		c.Closed(io.EOF)
	}
	conns := make([]*conn, len(ins))
	for i := range conns {
		conns[i] = newLoopConn(ts.srv, pipeAddr{})
		defer conns[i].Closed(io.EOF)
	}
	written := 0
	b.ReportAllocs()
	b.ResetTimer()
	for done, i := 0, 0; done < b.N*perOp; done += perCall {
		in := ins[i].chunk()
		var used int
		out, used, _ = conns[i].Input(in, out[:0])
		if used != len(in) {
			b.Fatalf("Input consumed %d of %d bytes", used, len(in))
		}
		written += len(out)
		if i++; i == len(conns) {
			i = 0
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(written)/float64(max(b.N, 1)), "reply-B/op")
}

// BenchmarkLoopCycle is latch bench's cycle workload with the yrmcds lock
// recipe: each connection locks and unlocks its own keys in turn (lock
// k0, unlock k0, lock k1, ...), one request per call (p1) or 16 (p16).
// One op is one lock+unlock cycle.
func BenchmarkLoopCycle(b *testing.B) {
	for _, p := range loopProtos {
		for _, depth := range []int{1, 16} {
			b.Run(p.name+"/p"+strconv.Itoa(depth), func(b *testing.B) {
				per := loopKeys / loopConns / 8 * 8 // whole chunks of 8 cycles
				var setup []byte
				ins := make([]*loopInputs, loopConns)
				for i := range ins {
					ins[i] = &loopInputs{}
					var chunk [][]byte
					for j := range per {
						k := "bench-c" + strconv.Itoa(i) + ":" + strconv.Itoa(j)
						setup = append(setup, p.set(k)...)
						if depth == 1 {
							ins[i].add(p.lock(k))
							ins[i].add(p.unlock(k))
							continue
						}
						if chunk = append(chunk, p.lock(k), p.unlock(k)); len(chunk) == depth {
							ins[i].add(chunk...)
							chunk = chunk[:0]
						}
					}
				}
				benchLoopConns(b, setup, ins, depth, 2)
			})
		}
	}
}

// BenchmarkLoopGetSet is latch bench's getset workload: random gets and
// sets, 9 to 1, of 100-byte values over 100k keys, one request per call
// (p1) or 16 (p16). One op is one request.
func BenchmarkLoopGetSet(b *testing.B) {
	for _, p := range loopProtos {
		for _, depth := range []int{1, 16} {
			b.Run(p.name+"/p"+strconv.Itoa(depth), func(b *testing.B) {
				keys := make([]string, loopKeys)
				var setup []byte
				for i := range keys {
					keys[i] = "bench-g" + strconv.Itoa(i)
					setup = append(setup, p.set(keys[i])...)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				const calls = 1 << 12 // per connection
				ins := make([]*loopInputs, loopConns)
				reqs := make([][]byte, 0, depth)
				for i := range ins {
					ins[i] = &loopInputs{}
					for range calls {
						reqs = reqs[:0]
						for range depth {
							k := keys[rng.IntN(len(keys))]
							if rng.IntN(10) == 0 {
								reqs = append(reqs, p.set(k))
							} else {
								reqs = append(reqs, p.get(k))
							}
						}
						ins[i].add(reqs...)
					}
				}
				benchLoopConns(b, setup, ins, depth, 1)
			})
		}
	}
}

// TestLoopBenchReplies checks the loop benchmarks' requests, so that they
// never measure an error path: every lock and unlock succeeds and every
// get hits.
func TestLoopBenchReplies(t *testing.T) {
	for _, p := range loopProtos {
		t.Run(p.name, func(t *testing.T) {
			ts := newTestServer(t)
			c := newLoopConn(ts.srv, pipeAddr{})
			defer c.Closed(io.EOF)
			in := append(append(append(p.set("k"), p.lock("k")...), p.unlock("k")...), p.get("k")...)
			out, used, open := c.Input(in, nil)
			if used != len(in) || !open {
				t.Fatalf("Input consumed %d of %d bytes, open %v", used, len(in), open)
			}
			switch p.name {
			case "text":
				want := "STORED\r\nOK\r\nOK\r\nVALUE k 0 100\r\n" + string(benchValue) + "\r\nEND\r\n"
				if string(out) != want {
					t.Errorf("replies %q, want %q", out, want)
				}
			case "binary":
				if len(out) != 4*headerLen+4+len(benchValue) {
					t.Fatalf("%d bytes of replies", len(out))
				}
				for i, off := 0, 0; i < 4; i++ {
					if st := binary.BigEndian.Uint16(out[off+6:]); st != stOK {
						t.Errorf("reply %d: status 0x%04x", i, st)
					}
					off += headerLen + int(binary.BigEndian.Uint32(out[off+8:]))
				}
				if !bytes.HasSuffix(out, benchValue) {
					t.Error("the get did not return the value")
				}
			}
		})
	}
}
