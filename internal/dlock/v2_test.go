package dlock

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/netserve"
)

// TestReferenceFrames replays the frames observed with temoto/dlock's
// reference server (dlock.md section 2.3) and compares the answers field by
// field, server_unix_time masked. Where latch adds an error_text the
// reference left empty, the shape shows "4:<text>".
func TestReferenceFrames(t *testing.T) {
	e := newEnv(t, nil)
	holder := e.dial(t)
	c := e.dial(t)

	tests := []struct {
		name   string
		before func()
		frame  string
		want   string
	}{
		{
			name:  "Ping id 1",
			frame: "00000006 0802 1001 2001",
			want:  "1:2 2:1 6:<t>", // 0000000e 0802 1001 30<t>
		},
		{
			name:  "Lock keys [a] id 2",
			frame: "0000000c 0802 1002 2002 9a03 03 1a0161",
			want:  "1:2 2:2 6:<t>",
		},
		{
			name:   "Lock wait 1000us keys [b c], busy",
			before: func() { lockOK(t, holder, 1, "b", "c") },
			// the reference's "Lock wait 1000us keys [a b], id 3" frame,
			// with keys b and c (a is held by c itself by now) and id 10
			frame: "00000012 0802 100a 2002 9a03 09 08e807 1a0163 1a0162",
			want:  "1:2 2:10 3:120 5:b 5:c 6:<t>", // busy keys sorted
		},
		{
			name:  "InvalidType id 30",
			frame: "00000009 0802 101e 2063 9a03 00",
			want:  "1:2 2:30 3:3 4:<text> 6:<t>", // the reference: 0802 101e 1803 30<t>
		},
		{
			name:  "zero-length frame",
			frame: "00000000",
			want:  "1:2 3:3 4:<text> 6:<t>", // the reference: 0802 1803 30<t>
		},
		{
			name:  "the reference CLI's Lock",
			frame: "00000019 0802 2002 9a03 12 08e0c65b 10c08db701 1a0164 1a0165 1a0166",
			want:  "1:2 6:<t>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			before := time.Now().UnixNano()
			c.send(hexFrame(t, tt.frame))
			r := c.recv()
			after := time.Now().UnixNano()
			if got := r.shape(); got != tt.want {
				t.Errorf("answer %s, want %s (text %q)", got, tt.want, r.text)
			}
			if r.unixTime < before || r.unixTime > after {
				t.Errorf("server_unix_time %d, want nanoseconds between %d and %d", r.unixTime, before, after)
			}
		})
	}

	// The CLI's lock is a 3 s lease (release_micro 3000000).
	info, _ := e.svc.Lock("e")
	if len(info.Holders) != 1 || info.Holders[0].Expires.IsZero() {
		t.Errorf("key e after the CLI's Lock: %+v, want one holder with a lease", info)
	}
}

// lockOK locks keys on c (version 2, wait forever) and fails unless Ok.
func lockOK(t *testing.T, c *client, id uint64, keys ...string) {
	t.Helper()
	c.sendMsg(v2Lock(id, 0, 0, keys...))
	if r := c.recv(); r.status != sOk || r.id != id {
		t.Fatalf("Lock %q (id %d): %s %q, want Ok", keys, id, r.shape(), r.text)
	}
}

// TestStatuses checks the answer to one request on a fresh connection, for
// every status version 2 can answer and the decisions of issue 4.
func TestStatuses(t *testing.T) {
	long := strings.Repeat("k", latch.MaxKeyLen+1)
	tests := []struct {
		name     string
		cfg      func(*Config)
		held     []string // keys another connection holds first
		req      msg
		status   uint64
		version  uint64   // of the answer; 0 means 2
		keys     []string // of the answer
		textHas  string   // substring of error_text
		noText   bool     // error_text must be empty
		wantHeld string   // a key the connection must hold afterwards
	}{
		{name: "ping", req: v2(1, tPing), status: sOk, noText: true},
		{name: "ping, version 0", req: msg(nil).varint(fReqID, 1).varint(fReqType, tPing), status: sOk},
		{name: "version 1", req: v2(1, tPing).varint(fReqVersion, 1), status: sVersion, version: 3, textHas: "version 1"},
		{name: "version 4", req: msg(nil).varint(fReqVersion, 4).varint(fReqID, 1).varint(fReqType, tPing), status: sVersion, version: 3},
		{name: "type Invalid", req: v2(1, tInvalid), status: sInvalidType},
		{name: "type 99", req: v2(1, 99), status: sInvalidType},
		{name: "v3 type Renew in v2", req: v2Lock(1, 0, 0, "a").varint(fReqType, 4), status: sInvalidType},
		{name: "lock", req: v2Lock(1, 0, 0, "a"), status: sOk, noText: true, wantHeld: "a"},
		{name: "lock without lock argument", req: v2(1, tLock), status: sGeneral, textHas: "no keys"},
		{name: "lock without keys", req: v2(1, tLock).bytes(fReqLock, lockArg(5, 0)), status: sGeneral, textHas: "InvalidRequest"},
		{name: "lock busy", held: []string{"a"}, req: v2Lock(1, 1, 0, "a"), status: sAcquireTimeout, keys: []string{"a"}, noText: true},
		{name: "lock busy, busy keys sorted and distinct", held: []string{"a", "c"}, req: v2Lock(1, 1, 0, "c", "b", "a", "c"), status: sAcquireTimeout, keys: []string{"a", "c"}, noText: true},
		{name: "lock empty key", req: v2Lock(1, 0, 0, ""), status: sGeneral, keys: []string{""}, textHas: "InvalidKey"},
		{name: "lock key with a space", req: v2Lock(1, 0, 0, "a b"), status: sGeneral, keys: []string{"a b"}, textHas: `key "a b"`},
		{name: "lock key with CR", req: v2Lock(1, 0, 0, "ok", "a\rb"), status: sGeneral, keys: []string{"a\rb"}, textHas: "invalid key"},
		{name: "lock key too long", req: v2Lock(1, 0, 0, long), status: sGeneral, keys: []string{long}, textHas: "251 bytes"},
		{name: "lock key of 250 bytes", req: v2Lock(1, 0, 0, long[1:]), status: sOk, wantHeld: long[1:]},
		{name: "too many keys", cfg: maxKeys(2), req: v2Lock(1, 0, 0, "a", "b", "c"), status: sTooManyKeys, textHas: "at most 2"},
		{name: "duplicates count once", cfg: maxKeys(2), req: v2Lock(1, 0, 0, "a", "b", "a", "b"), status: sOk, wantHeld: "b"},
		{name: "unlock not held", req: v2Unlock(1, "a"), status: sGeneral, textHas: "NotHeld"},
		{name: "unlock held by another", held: []string{"a"}, req: v2Unlock(1, "a"), status: sGeneral, textHas: "NotHeld"},
		{name: "unlock without keys", req: v2(1, tUnlock), status: sGeneral, textHas: "no keys"},
		{name: "unlock too many keys", cfg: maxKeys(1), req: v2Unlock(1, "a", "b"), status: sTooManyKeys},
		{name: "unknown fields ignored", req: v2(1, tPing).varint(999, 7).str(1000, "x"), status: sOk},
		{name: "malformed protobuf", req: msg{0x0a, 0xff}, status: sGeneral, textHas: "malformed"},
		{name: "token not checked when none configured", req: v2(1, tPing).str(fReqAccessToken, "anything"), status: sOk},
		{name: "missing token", cfg: tokens("s3cret"), req: v2(1, tPing), status: sGeneral, textHas: "Unauthorized"},
		{name: "wrong token", cfg: tokens("s3cret"), req: v2(1, tPing).str(fReqAccessToken, "guess"), status: sGeneral, textHas: "Unauthorized"},
		{name: "right token", cfg: tokens("other", "s3cret"), req: v2Lock(1, 0, 0, "a").str(fReqAccessToken, "s3cret"), status: sOk, wantHeld: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			if len(tt.held) > 0 {
				h := e.dial(t)
				m := v2Lock(7, 0, 0, tt.held...)
				if tt.cfg != nil {
					m = m.str(fReqAccessToken, "s3cret")
				}
				h.sendMsg(m)
				if r := h.recv(); r.status != sOk {
					t.Fatalf("holder's Lock: %s %q", r.shape(), r.text)
				}
			}
			c := e.dial(t)
			c.sendMsg(tt.req)
			r := c.recv()
			wantVersion := tt.version
			if wantVersion == 0 {
				wantVersion = 2
			}
			wantID := uint64(1)
			if bytes.Equal(tt.req, msg{0x0a, 0xff}) {
				wantID = 0
			}
			if r.status != tt.status || r.version != wantVersion || r.id != wantID {
				t.Errorf("answer %s (text %q), want version %d, id %d, status %d", r.shape(), r.text, wantVersion, wantID, tt.status)
			}
			if !slices.Equal(r.keys, tt.keys) {
				t.Errorf("answer keys %q, want %q", r.keys, tt.keys)
			}
			if tt.noText && r.text != "" {
				t.Errorf("error_text %q, want none", r.text)
			}
			if tt.status != sOk && !tt.noText && r.text == "" {
				t.Errorf("status %d without error_text", r.status)
			}
			if !strings.Contains(r.text, tt.textHas) {
				t.Errorf("error_text %q, want it to contain %q", r.text, tt.textHas)
			}
			if tt.wantHeld != "" {
				if info, _ := e.svc.Lock(tt.wantHeld); !heldBy(c.peer())(info) {
					t.Errorf("key %q: %+v, want it held by %s", tt.wantHeld, info, c.peer())
				}
			}
			// The connection still works.
			c.sendMsg(v2(2, tPing).str(fReqAccessToken, "s3cret"))
			if r := c.recv(); r.id != 2 || r.status != sOk {
				t.Errorf("Ping after: %s %q", r.shape(), r.text)
			}
		})
	}
}

func maxKeys(n int) func(*Config) { return func(c *Config) { c.MaxKeys = n } }

// tokens gives the server access tokens that allow everything.
func tokens(toks ...string) func(*Config) {
	return func(c *Config) {
		c.Tokens = nil
		for _, t := range toks {
			c.Tokens = append(c.Tokens, netserve.Token{Value: t})
		}
	}
}

// TestPipelined sends many requests in one write; the answers come in
// request order.
func TestPipelined(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	reqs := []struct {
		m      msg
		status uint64
	}{
		{v2(1, tPing), sOk},
		{v2Lock(2, 0, 0, "a"), sOk},
		{v2Lock(3, 0, 0, "b", "c"), sOk},
		{v2Unlock(4, "a"), sOk},
		{v2Unlock(5, "a"), sGeneral},
		{v2(6, 99), sInvalidType},
		{v2Lock(7, 0, 0, "a"), sOk},
		{msg(nil).varint(fReqVersion, 9).varint(fReqID, 8), sVersion},
		{v2Unlock(9, "a", "b", "c"), sOk},
		{v2(10, tPing), sOk},
	}
	var wire []byte
	for _, r := range reqs {
		wire = frame.Append(wire, r.m)
	}
	wire = frame.Append(wire, nil) // a zero-length frame: InvalidType, no id
	c.send(wire)
	for i, want := range reqs {
		r := c.recv()
		if r.id != uint64(i+1) || r.status != want.status {
			t.Errorf("answer %d: id %d status %d (%q), want id %d status %d", i, r.id, r.status, r.text, i+1, want.status)
		}
	}
	if r := c.recv(); r.id != 0 || r.status != sInvalidType {
		t.Errorf("answer to the empty frame: %s", r.shape())
	}
}

// TestWaitingLockBlocksLaterRequests: version 2 answers in order, so a
// waiting Lock holds back the answers to the requests behind it.
func TestWaitingLockBlocksLaterRequests(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	lockOK(t, holder, 1, "k")

	c.sendMsg(v2Lock(1, 0, 0, "k"))
	e.waitFor(t, "k", "the Lock queued", waiters(1))
	c.sendMsg(v2(2, tPing))
	c.sendMsg(v2Lock(3, 0, 0, "other"))
	c.sendMsg(v2Unlock(4, "k")) // needs the Lock granted first
	// Every request behind the Lock is read (the reader keeps reading) but
	// waits for it; "other" is not locked yet.
	e.waitConn(t, c, "3 requests queued", func(sc *conn) bool { return len(sc.queue) == 3 && sc.parked })
	if info, ok := e.svc.Lock("other"); ok {
		t.Fatalf("key other: %+v, want it untouched while the Lock waits", info)
	}

	holder.sendMsg(v2Unlock(2, "k"))
	if r := holder.recv(); r.status != sOk {
		t.Fatalf("holder's Unlock: %s %q", r.shape(), r.text)
	}
	for id := uint64(1); id <= 4; id++ {
		if r := c.recv(); r.id != id || r.status != sOk {
			t.Fatalf("answer %d: %s %q, want id %d Ok", id, r.shape(), r.text, id)
		}
	}
}

// TestWaitForever: wait_micro 0 waits until the holder goes away, and so
// does a wait too long for a duration (the reference timed out at once).
func TestWaitForever(t *testing.T) {
	for _, wait := range []uint64{0, 1<<63 - 1, 1<<64 - 1, 9223372036854776} {
		e := newEnv(t, nil)
		holder, c := e.dial(t), e.dial(t)
		lockOK(t, holder, 1, "k")
		c.sendMsg(v2Lock(5, wait, 0, "k"))
		e.waitFor(t, "k", "the Lock queued", waiters(1))
		if info, _ := e.svc.Lock("k"); !info.Waiters[0].Deadline.IsZero() {
			t.Errorf("wait_micro %d: the waiter has deadline %v, want none", wait, info.Waiters[0].Deadline)
		}
		holder.nc.Close()
		if r := c.recv(); r.id != 5 || r.status != sOk {
			t.Errorf("wait_micro %d: %s %q, want Ok once the holder left", wait, r.shape(), r.text)
		}
	}
}

// TestAcquireTimeout: a Lock that waits wait_micro and does not get every
// key answers AcquireTimeout with the busy keys and holds nothing.
func TestAcquireTimeout(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	lockOK(t, holder, 1, "b")
	c.sendMsg(v2Lock(2, 2000, 0, "a", "b"))
	r := c.recv()
	if r.status != sAcquireTimeout || !slices.Equal(r.keys, []string{"b"}) {
		t.Fatalf("answer %s, want AcquireTimeout with keys [b]", r.shape())
	}
	if info, ok := e.svc.Lock("a"); ok {
		t.Errorf("key a after a failed Lock: %+v, want untouched (all or nothing)", info)
	}
	lockOK(t, c, 3, "a") // a was never taken
}

// TestFIFO: waiters get a key in the order they asked, the moment it frees.
func TestFIFO(t *testing.T) {
	e := newEnv(t, nil)
	holder := e.dial(t)
	lockOK(t, holder, 1, "k")
	var ws []*client
	for i := range 4 {
		c := e.dial(t)
		c.sendMsg(v2Lock(10, 0, 0, "k"))
		e.waitFor(t, "k", "the next Lock queued", waiters(i+1))
		ws = append(ws, c)
	}
	prev := holder
	for i, c := range ws {
		prev.sendMsg(v2Unlock(20, "k"))
		if r := prev.recv(); r.status != sOk {
			t.Fatalf("Unlock: %s %q", r.shape(), r.text)
		}
		if r := c.recv(); r.status != sOk || r.id != 10 {
			t.Fatalf("waiter %d: %s %q", i, r.shape(), r.text)
		}
		info, _ := e.svc.Lock("k")
		if !heldBy(c.peer())(info) || len(info.Waiters) != len(ws)-i-1 {
			t.Fatalf("after hand-off %d: %+v, want held by waiter %d (%s)", i, info, i, c.peer())
		}
		prev = c
	}
}

// TestUnlockReleases: Unlock releases at once and only the owner's keys;
// every key must be held or nothing is released.
func TestUnlockReleases(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(t), e.dial(t)
	lockOK(t, a, 1, "k", "j")
	b.sendMsg(v2Lock(2, 0, 0, "k"))
	e.waitFor(t, "k", "b queued", waiters(1))

	a.sendMsg(v2Unlock(3, "k", "nope"))
	if r := a.recv(); r.status != sGeneral || !strings.HasPrefix(r.text, "NotHeld: ") {
		t.Fatalf("Unlock of a key not held: %s %q, want General NotHeld", r.shape(), r.text)
	}
	if info, _ := e.svc.Lock("k"); !heldBy(a.peer())(info) {
		t.Fatalf("k after a failed Unlock: %+v, want still held by a", info)
	}
	a.sendMsg(v2Unlock(4, "k"))
	if r := a.recv(); r.status != sOk {
		t.Fatalf("Unlock: %s %q", r.shape(), r.text)
	}
	if r := b.recv(); r.status != sOk || r.id != 2 {
		t.Fatalf("b: %s %q, want its Lock granted", r.shape(), r.text)
	}
	// The reference's benchmark loop: Lock / Unlock of one key.
	for i := range uint64(3) {
		lockOK(t, a, 10+i, "q")
		a.sendMsg(v2Unlock(20+i, "q"))
		if r := a.recv(); r.status != sOk {
			t.Fatalf("Unlock q: %s %q", r.shape(), r.text)
		}
	}
}

// TestRelock: re-locking one's own key succeeds and resets its lease.
func TestRelock(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	expires := func() time.Time {
		info, _ := e.svc.Lock("k")
		if len(info.Holders) != 1 {
			t.Fatalf("k: %+v, want one holder", info)
		}
		return info.Holders[0].Expires
	}
	c.sendMsg(v2Lock(1, 0, uint64(time.Hour/time.Microsecond), "k"))
	if r := c.recv(); r.status != sOk {
		t.Fatal(r.text)
	}
	first := expires()
	if first.IsZero() {
		t.Fatal("a Lock with release_micro has no lease")
	}
	lockOK(t, c, 2, "k")
	if exp := expires(); !exp.IsZero() {
		t.Errorf("re-lock without release_micro: lease ends %v, want none", exp)
	}
	c.sendMsg(v2Lock(3, 0, uint64(2*time.Hour/time.Microsecond), "k", "j"))
	if r := c.recv(); r.status != sOk {
		t.Fatal(r.text)
	}
	if exp := expires(); !exp.After(first) {
		t.Errorf("re-lock with a 2h lease ends %v, want after %v", exp, first)
	}
}

// TestDisconnectReleases: a connection that closes, cleanly or with a
// reset, releases its locks without a lease at once, and its waiting Lock
// leaves nothing behind; leases outlive it.
func TestDisconnectReleases(t *testing.T) {
	for _, how := range []string{"close", "reset"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, nil)
			a, b := e.dial(t), e.dial(t)
			lockOK(t, a, 1, "k")
			a.sendMsg(v2Lock(2, 0, uint64(time.Hour/time.Microsecond), "lease"))
			if r := a.recv(); r.status != sOk {
				t.Fatal(r.text)
			}
			holder := e.dial(t)
			lockOK(t, holder, 1, "w")
			a.sendMsg(v2Lock(3, 0, 0, "w")) // a waits for w
			e.waitFor(t, "w", "a queued", waiters(1))
			b.sendMsg(v2Lock(4, 0, 0, "k"))
			e.waitFor(t, "k", "b queued", waiters(1))

			if how == "reset" {
				a.reset()
			} else {
				a.nc.Close()
			}
			if r := b.recv(); r.status != sOk || r.id != 4 {
				t.Fatalf("b: %s %q, want k granted when a left", r.shape(), r.text)
			}
			e.waitFor(t, "w", "a's waiter gone", waiters(0))
			info, _ := e.svc.Lock("lease")
			if len(info.Holders) != 1 || info.Holders[0].Session != 0 {
				t.Errorf("leased key after disconnect: %+v, want held by no session until it expires", info)
			}
			b.sendMsg(v2Lock(5, 1, 0, "lease"))
			if r := b.recv(); r.status != sAcquireTimeout {
				t.Errorf("Lock of the leased key: %s, want AcquireTimeout", r.shape())
			}
		})
	}
}

// TestFrameTooLarge: a frame over the limit is answered with an error and
// the connection closes; its locks are released.
func TestFrameTooLarge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxFrame = 1024 })
	c := e.dial(t)
	lockOK(t, c, 1, "k")
	big := v2Lock(2, 0, 0, strings.Repeat("x", 2000))
	c.send(frame.Append(nil, big))
	r := c.recv()
	if r.status != sGeneral || r.id != 0 || !strings.Contains(r.text, "more than the limit of 1024") {
		t.Errorf("answer %s %q, want General naming the limit", r.shape(), r.text)
	}
	c.expectEOF()
	e.waitFor(t, "k", "k released", free)

	// A frame of exactly the limit is fine.
	c = e.dial(t)
	for n := 1000; ; n++ {
		m := v2(3, tPing).str(99, strings.Repeat("p", n))
		if len(m) == 1024 {
			c.sendMsg(m)
			break
		}
		if len(m) > 1024 {
			t.Fatal("cannot build a 1024-byte frame")
		}
	}
	if r := c.recv(); r.status != sOk || r.id != 3 {
		t.Errorf("a frame of the limit: %s %q", r.shape(), r.text)
	}
}

// TestSplitFrames: a frame split across writes, the header too, reads
// whole (the reference zero-padded it).
func TestSplitFrames(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	c.nc.(interface{ SetNoDelay(bool) error }).SetNoDelay(true)
	wire := frame.Append(nil, v2Lock(1, 0, 0, "alpha", "beta", strings.Repeat("g", 200)))
	wire = frame.Append(wire, v2(2, tPing))
	for i := 0; i < len(wire); i += 7 {
		c.send(wire[i:min(i+7, len(wire))])
		time.Sleep(50 * time.Microsecond) // makes separate segments likely; not asserted
	}
	for id := uint64(1); id <= 2; id++ {
		if r := c.recv(); r.id != id || r.status != sOk {
			t.Errorf("answer %d: %s %q", id, r.shape(), r.text)
		}
	}
}
