package memcache

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// binReq encodes a binary request for seeds and tests.
func binReq(op byte, key, extras, value []byte, opaque uint32, casv uint64) []byte {
	h := make([]byte, headerLen, headerLen+len(extras)+len(key)+len(value))
	h[0] = magicRequest
	h[1] = op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], opaque)
	binary.BigEndian.PutUint64(h[16:], casv)
	return append(append(append(h, extras...), key...), value...)
}

func storeExtras(flags, exp uint32) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, flags)
	binary.BigEndian.PutUint32(b[4:], exp)
	return b
}

func textSeeds() [][]byte {
	return [][]byte{
		[]byte("set a 0 0 1\r\nx\r\nget a\r\ngets a b\r\n"),
		[]byte("set a 0 0 1\r\nx\r\nlock a\r\nlock a\r\nunlock a\r\nunlock a\r\n"),
		[]byte("add a 5 100 3 noreply\r\nabc\r\nappend a 0 0 2\r\nde\r\nprepend a 0 0 1\r\nz\r\nget a\r\n"),
		[]byte("set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nincr n -1\r\nincr n x\r\n"),
		[]byte("cas a 0 0 1 1\r\nx\r\ntouch a 10\r\ndelete a\r\ndelete a 0\r\n"),
		[]byte("set a 0 0 3\r\nabcd\r\nset b 0 0 1 bogus\r\ny\r\n\n\r\nGET a\r\n"),
		[]byte("flush_all\r\nflush_all 10 noreply\r\nkeys\r\nkeys a\r\nstats\r\nstats ops\r\nstats bogus\r\n"),
		[]byte("verbosity 1\r\nslabs x\r\nunlock_all\r\nversion\r\nquit\r\n"),
		[]byte("set k 0 0 40000000\r\n"),
		[]byte("set k 0 0 2000000\r\n" + string(bytes.Repeat([]byte("x"), 100))),
	}
}

func binarySeeds() [][]byte {
	ex := storeExtras(5, 0)
	arith := make([]byte, 20)
	binary.BigEndian.PutUint64(arith, 1)
	return [][]byte{
		binReq(opSet, []byte("k"), ex, []byte("v"), 1, 0),
		append(binReq(opSet, []byte("k"), ex, []byte("v"), 1, 0), binReq(opLock, []byte("k"), nil, nil, 2, 0)...),
		append(binReq(opLaG, []byte("k"), nil, nil, 3, 0), binReq(opRaU, []byte("k"), ex, []byte("w"), 4, 0)...),
		binReq(opIncrement, []byte("n"), arith, nil, 5, 0),
		binReq(opGetKQ, []byte("k"), nil, nil, 6, 0),
		binReq(opStat, []byte("ops"), nil, nil, 7, 0),
		binReq(opKeys, nil, nil, nil, 8, 0),
		binReq(0x30, nil, nil, nil, 9, 0),
		binReq(opSet, []byte("k"), []byte{1, 2, 3}, nil, 10, 0),
		binReq(opUnlockAllQ, nil, nil, nil, 11, 0)[:10],
		binReq(opQuit, nil, nil, nil, 12, 0),
	}
}

// fuzzConn replays input on one connection and checks that the server ends
// the connection when the client does, and that no lock outlives it.
func fuzzConn(t *testing.T, ts *testServer, input []byte) {
	pc := ts.dial()
	_ = pc.send(input) // the server may hang up first (quit, oversized)
	pc.finish()
	ts.noLocksLeft()
}

// FuzzTextConn feeds text-protocol input to a connection.
func FuzzTextConn(f *testing.F) {
	for _, s := range textSeeds() {
		f.Add(s)
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		ts.t = t
		fuzzConn(t, ts, input)
	})
}

// FuzzBinaryConn feeds binary-protocol input to a connection: every input
// starts with the binary magic byte.
func FuzzBinaryConn(f *testing.F) {
	for _, s := range binarySeeds() {
		f.Add(s)
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		ts.t = t
		fuzzConn(t, ts, append([]byte{magicRequest}, input...))
	})
}

// FuzzReplay replays two interleaved connections: the input is split at
// 0xff bytes into chunks sent alternately on connections A and B, mixing
// both protocols. Locks taken by either must be gone once both end, and
// the server must still serve a fresh connection correctly.
func FuzzReplay(f *testing.F) {
	f.Add([]byte("set a 0 0 1\r\nx\r\nlock a\r\n\xffset a 0 0 1\r\ny\r\nunlock a\r\n\xffdelete a\r\n"))
	f.Add(append(append(binReq(opSet, []byte("k"), storeExtras(0, 0), []byte("v"), 1, 0), 0xff),
		binReq(opLock, []byte("k"), nil, nil, 2, 0)...))
	for _, s := range textSeeds() {
		f.Add(s)
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		ts.t = t
		a, b := ts.dial(), ts.dial()
		for i, chunk := range bytes.Split(input, []byte{0xff}) {
			pc := a
			if i%2 == 1 {
				pc = b
			}
			_ = pc.send(chunk)
		}
		a.finish()
		b.finish()
		ts.noLocksLeft()
		c := ts.dialInteractive()
		if got := c.exchange([]byte("set fresh 0 0 2\r\nok\r\nget fresh\r\n")); string(got) != "STORED\r\nVALUE fresh 0 2\r\nok\r\nEND\r\n" {
			t.Fatalf("a fresh connection got %q", got)
		}
		c.finish()
	})
}
