package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// t0 is a realistic At: an instant in 2025, in Unix nanoseconds.
const t0 = int64(1_750_000_000_123_456_789)

// hdr returns a command of op with a realistic header, the seq-th of its
// proposer.
func hdr(op Op, seq uint64) Command {
	return Command{Op: op, At: t0 + int64(seq)*int64(time.Millisecond), Origin: 0x5eed_0001_cafe_f00d, Seq: seq}
}

// testCommands has one command of every Op, with realistic values in the
// fields its Op uses and zero in the others (so that each is its own
// decoding).
func testCommands() map[Op]Command {
	cmds := make(map[Op]Command)
	add := func(c Command, fill func(*Command)) {
		fill(&c)
		cmds[c.Op] = c
	}
	add(hdr(OpSeed, 1), func(c *Command) { c.Token = latch.Token(t0 / 1000) })
	add(hdr(OpOpenSession, 2), func(c *Command) {
		c.TTL, c.LockDelay, c.Key = 30*time.Second, 15*time.Second, []byte("node-b")
	})
	add(hdr(OpKeepAlive, 3), func(c *Command) { c.Session, c.Gen = 17, 2 })
	add(hdr(OpEndSession, 4), func(c *Command) { c.Session, c.Token = 18, 2 })
	add(hdr(OpAcquire, 5), func(c *Command) {
		c.Session, c.Gen = 17, 2
		c.Req = latch.LockRequest{
			Keys:   []string{"jobs/nightly", "db:users:42", strings.Repeat("k", latch.MaxKeyLen)},
			Mode:   latch.Shared,
			Limit:  3,
			Wait:   2500 * time.Millisecond,
			Lease:  time.Minute,
			Relock: latch.RelockReuse,
		}
	})
	add(hdr(OpCancel, 6), func(c *Command) { c.Waiter = 1234 })
	add(hdr(OpRelease, 7), func(c *Command) {
		c.Session, c.Gen = 17, 2
		c.Req.Keys = []string{"jobs/nightly", "db:users:42"}
	})
	add(hdr(OpReleaseAll, 8), func(c *Command) { c.Session, c.Gen = 17, 2 })
	add(hdr(OpRenew, 9), func(c *Command) {
		c.Session, c.Gen = 17, 2
		c.Req.Keys = []string{"jobs/nightly"}
		c.Req.Lease = 90 * time.Second
	})
	add(hdr(OpForceRelease, 10), func(c *Command) { c.Key = []byte("jobs/nightly") })
	add(hdr(OpTick, 11), func(*Command) {})
	add(hdr(OpPromote, 12), func(c *Command) { c.TTL = 4 * time.Second })
	add(hdr(OpNodeAlive, 13), func(c *Command) { c.Key = []byte("node-b") })
	add(hdr(OpEndOwner, 14), func(c *Command) { c.Key = []byte("node-c") })
	add(hdr(OpResume, 15), func(c *Command) { c.Session = 19 })
	for i, op := range []Op{OpItemSet, OpItemAdd, OpItemReplace, OpItemCAS, OpItemReplaceAndUnlock} {
		add(hdr(op, 20+uint64(i)), func(c *Command) {
			c.Session = latch.SessionID(100 + i)
			c.Key = []byte("user:42:profile")
			c.Value = []byte(`{"name":"Ada","langs":["go","c"]}`)
			c.Flags = 0xdead_beef
			c.Exptime = 3600
			c.CAS = 987654321
		})
	}
	add(hdr(OpItemAppend, 30), func(c *Command) {
		c.Session, c.Key, c.Value, c.CAS = 101, []byte("log"), []byte(" tail"), 77
	})
	add(hdr(OpItemPrepend, 31), func(c *Command) {
		c.Session, c.Key, c.Value = 0, []byte("log"), []byte("head ")
	})
	add(hdr(OpItemIncr, 32), func(c *Command) {
		c.Session, c.Key, c.Delta, c.CAS = 102, []byte("hits"), 1, 78
		c.Value, c.Exptime = []byte("10"), 3600
	})
	add(hdr(OpItemDecr, 33), func(c *Command) {
		c.Session, c.Key, c.Delta = 102, []byte("stock"), math.MaxUint64
	})
	add(hdr(OpItemDelete, 34), func(c *Command) {
		c.Session, c.Key, c.CAS = 103, []byte("user:42:profile"), 79
	})
	add(hdr(OpItemTouch, 35), func(c *Command) { c.Key, c.Exptime = []byte("sess:abc"), 1_750_000_600 })
	add(hdr(OpItemGetAndTouch, 36), func(c *Command) { c.Key, c.Exptime = []byte("sess:abc"), -1 })
	add(hdr(OpItemFlush, 37), func(c *Command) { c.Exptime = 10 })
	add(hdr(OpItemLock, 38), func(c *Command) {
		c.Session, c.Key, c.Exptime, c.LockMode = 104, []byte("user:42:profile"), 60, cache.LockTouch
	})
	add(hdr(OpItemUnlock, 39), func(c *Command) { c.Session, c.Key = 104, []byte("user:42:profile") })
	add(hdr(OpItemUnlockAll, 40), func(c *Command) { c.Session = 104 })
	add(hdr(OpItemEvict, 41), func(c *Command) { c.Key, c.CAS = []byte("old"), 5 })
	add(hdr(OpOwned, 42), func(c *Command) {
		c.Owned, c.OwnedFlags, c.Prefix = OwnedObtain, OwnedMatch|OwnedAll, 22
		c.Req.Keys, c.Req.Lease = []string{"lock:orders"}, 8*time.Second
		c.Value = []byte("0f6c1a5e8b3e4d2a9c7f1e0d3b5a6c8e")
	})
	add(hdr(OpOwnedTx, 43), func(c *Command) {
		c.Tx = []Command{
			{Op: OpOwned, Owned: OwnedGet, Req: latch.LockRequest{Keys: []string{"lock:orders"}}},
			{Op: OpOwned, Owned: OwnedRelease, Req: latch.LockRequest{Keys: []string{"lock:orders"}}},
			{Op: OpOwned, Owned: OwnedZAdd, Req: latch.LockRequest{Keys: []string{"sem"}}, ZSet: ZSetArgs{
				Flags: zset.NX | zset.CH, Pairs: []zset.Pair{{Score: 1.5, Member: "a"}, {Score: math.Inf(-1), Member: ""}}}},
			{Op: OpOwned, Owned: OwnedZRem, Req: latch.LockRequest{Keys: []string{"sem"}}, ZSet: ZSetArgs{Members: []string{"a", "b"}}},
			{Op: OpOwned, Owned: OwnedZRemRangeByScore, Req: latch.LockRequest{Keys: []string{"sem"}}, ZSet: ZSetArgs{
				Range: zset.Range{Min: zset.Bound{Value: math.Inf(-1)}, Max: zset.Bound{Value: 1700000000000, Excl: true}}}},
			{Op: OpOwned, Owned: OwnedZRemRangeByRank, Req: latch.LockRequest{Keys: []string{"sem"}}, ZSet: ZSetArgs{Start: 0, Stop: -3}},
			{Op: OpOwned, Owned: OwnedZExpire, OwnedFlags: OwnedPersist, Req: latch.LockRequest{Keys: []string{"sem"}, Lease: time.Second}},
			{Op: OpOwned, Owned: OwnedZPut, OwnedFlags: OwnedKeepTTL, Req: latch.LockRequest{Keys: []string{"sem"}}, ZSet: ZSetArgs{
				Pairs: []zset.Pair{{Score: 2, Member: "x"}}}},
			{Op: OpOwned, Owned: OwnedZGet, Req: latch.LockRequest{Keys: []string{"sem"}}},
			{Op: OpOwned, Owned: OwnedZDel, Req: latch.LockRequest{Keys: []string{"sem"}}},
		}
		c.Watch = []Watch{{Key: "lock:orders", Token: 77, Expires: t0 + 5, Owner: "me"}, {Key: "free"}, {Key: "sem", Version: 300}}
	})
	add(hdr(OpZOpen, 44), func(c *Command) {
		c.TTL, c.Value, c.Exptime = 4*time.Second, []byte("0123456789abcdef"), 1795832362408
	})
	add(hdr(OpZAttach, 45), func(c *Command) { c.Session, c.Gen, c.Value = 19, 2, []byte("0123456789abcdef") })
	add(hdr(OpZWrite, 46), func(c *Command) {
		c.Session, c.Gen, c.Flags, c.Exptime = 19, 1, ZMulti, 1795832362409
		c.Value = AppendZOps(nil, []znode.Op{
			{Kind: znode.OpCreate, Path: "/locks/l-", Data: []byte("me"), Mode: znode.EphemeralSequential, ACL: []znode.ACL{{Perms: znode.PermAll, Scheme: "world", ID: "anyone"}}},
			{Kind: znode.OpCheck, Path: "/locks", Version: -1},
		})
	})
	add(hdr(OpZReap, 47), func(c *Command) { c.Exptime = 1795832362410 })
	return cmds
}

// allOps returns every valid Op, from 1 to numOps-1.
func allOps() []Op {
	ops := make([]Op, 0, numOps-1)
	for op := Op(1); op < numOps; op++ {
		ops = append(ops, op)
	}
	return ops
}

// testBatch returns the commands of testCommands in Op order.
func testBatch(t testing.TB) []Command {
	t.Helper()
	cases := testCommands()
	var cmds []Command
	for _, op := range allOps() {
		c, ok := cases[op]
		if !ok {
			t.Fatalf("testCommands has no command of %v", op)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// normalize zeroes the fields of *c that c.Op does not use and makes its
// empty slices nil: it turns *c into what DecodeCommand returns for its
// encoding. It reports false for an Op it does not know. The field sets
// are written from the Op constants' docs, apart from the codec's
// opFields, so that the tests check one against the other.
func normalize(c *Command) bool {
	n := Command{Op: c.Op, At: c.At, Origin: c.Origin, Seq: c.Seq}
	switch c.Op {
	case OpSeed:
		n.Token = c.Token
	case OpOpenSession:
		n.TTL, n.LockDelay, n.Key = c.TTL, c.LockDelay, c.Key
	case OpPromote:
		n.TTL = c.TTL
	case OpNodeAlive, OpEndOwner:
		n.Key = c.Key
	case OpKeepAlive, OpReleaseAll:
		n.Session, n.Gen = c.Session, c.Gen
	case OpItemUnlockAll, OpResume:
		n.Session = c.Session
	case OpEndSession:
		n.Session, n.Token = c.Session, c.Token
	case OpAcquire:
		n.Session, n.Gen, n.Req = c.Session, c.Gen, c.Req
	case OpCancel:
		n.Waiter = c.Waiter
	case OpRelease:
		n.Session, n.Gen, n.Req.Keys = c.Session, c.Gen, c.Req.Keys
	case OpRenew:
		n.Session, n.Gen, n.Req.Keys, n.Req.Lease = c.Session, c.Gen, c.Req.Keys, c.Req.Lease
	case OpForceRelease:
		n.Key = c.Key
	case OpTick:
	case OpItemSet, OpItemAdd, OpItemReplace, OpItemCAS, OpItemReplaceAndUnlock:
		n.Session, n.Key, n.Value, n.Flags, n.Exptime, n.CAS = c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS
	case OpItemAppend, OpItemPrepend:
		n.Session, n.Key, n.Value, n.CAS = c.Session, c.Key, c.Value, c.CAS
	case OpItemIncr, OpItemDecr:
		n.Session, n.Key, n.Value, n.Exptime, n.Delta, n.CAS = c.Session, c.Key, c.Value, c.Exptime, c.Delta, c.CAS
	case OpItemDelete:
		n.Session, n.Key, n.CAS = c.Session, c.Key, c.CAS
	case OpItemTouch, OpItemGetAndTouch:
		n.Key, n.Exptime = c.Key, c.Exptime
	case OpItemFlush:
		n.Exptime = c.Exptime
	case OpItemLock:
		n.Session, n.Key, n.Exptime, n.LockMode = c.Session, c.Key, c.Exptime, c.LockMode
	case OpItemUnlock:
		n.Session, n.Key = c.Session, c.Key
	case OpItemEvict:
		n.Key, n.CAS = c.Key, c.CAS
	case OpOwned:
		n.Req.Keys, n.Req.Lease, n.Value = c.Req.Keys, c.Req.Lease, c.Value
		n.Owned, n.OwnedFlags, n.Prefix = c.Owned, c.OwnedFlags, c.Prefix
		// The sorted-set kinds' arguments, as each kind's doc lists them.
		switch a := &c.ZSet; c.Owned {
		case OwnedZAdd:
			n.ZSet.Flags, n.ZSet.Pairs = a.Flags, a.Pairs
		case OwnedZPut:
			n.ZSet.Pairs = a.Pairs
		case OwnedZRem:
			n.ZSet.Members = a.Members
		case OwnedZRemRangeByScore:
			n.ZSet.Range = a.Range
		case OwnedZRemRangeByRank:
			n.ZSet.Start, n.ZSet.Stop = a.Start, a.Stop
		}
		if len(n.ZSet.Pairs) == 0 {
			n.ZSet.Pairs = nil
		}
		if len(n.ZSet.Members) == 0 {
			n.ZSet.Members = nil
		}
	case OpZOpen:
		n.TTL, n.Value, n.Exptime = c.TTL, c.Value, c.Exptime
	case OpZAttach:
		n.Session, n.Gen, n.Value = c.Session, c.Gen, c.Value
	case OpZWrite:
		n.Session, n.Gen, n.Value, n.Flags, n.Exptime = c.Session, c.Gen, c.Value, c.Flags, c.Exptime
	case OpZReap:
		n.Exptime = c.Exptime
	case OpOwnedTx:
		for _, sub := range c.Tx {
			if !normalize(&sub) {
				return false
			}
			n.Tx = append(n.Tx, sub)
		}
		if len(c.Watch) > 0 {
			n.Watch = c.Watch
		}
	default:
		return false
	}
	if len(n.Req.Keys) == 0 {
		n.Req.Keys = nil
	}
	if len(n.Key) == 0 {
		n.Key = nil
	}
	if len(n.Value) == 0 {
		n.Value = nil
	}
	*c = n
	return true
}

// fullCommand returns a command of op with every field set to a value
// other than zero, valid for the codec.
func fullCommand(op Op) Command {
	c := hdr(op, 99)
	c.Session, c.Gen = 7, 6
	c.Req = latch.LockRequest{
		Keys:   []string{"a", "bb"},
		Mode:   latch.Shared,
		Limit:  2,
		Wait:   latch.WaitForever,
		Lease:  time.Second,
		Relock: latch.RelockReuse,
	}
	c.Waiter = 8
	c.TTL, c.LockDelay = time.Minute, time.Second
	c.Token = 9
	c.Key, c.Value = []byte("key"), []byte("value")
	c.Flags, c.Exptime, c.CAS, c.Delta = 10, 11, 12, 13
	c.LockMode = cache.LockGet
	c.Owned, c.OwnedFlags, c.Prefix = OwnedRenew, OwnedMatch|OwnedAdd, 14
	sub := hdr(OpOwned, 100)
	sub.Owned, sub.Req.Keys, sub.Value = OwnedSet, []string{"k"}, []byte("v")
	c.Tx = []Command{sub}
	c.Watch = []Watch{{Key: "k", Token: 3, Expires: -4, Owner: "v"}, {Key: "z", Version: 15}}
	return c
}

// decode decodes b, which must hold exactly one command.
func decode(t *testing.T, b []byte) Command {
	t.Helper()
	var c Command
	n, err := DecodeCommand(b, &c)
	if err != nil {
		t.Fatalf("DecodeCommand(%x): %v", b, err)
	}
	if n != len(b) {
		t.Fatalf("DecodeCommand(%x) used %d bytes of %d", b, n, len(b))
	}
	return c
}

func TestCommandRoundTrip(t *testing.T) {
	cases := testCommands()
	for _, op := range allOps() {
		t.Run(op.String(), func(t *testing.T) {
			c, ok := cases[op]
			if !ok {
				t.Fatalf("no test command of %v: add one to testCommands", op)
			}
			n := c
			if !normalize(&n) {
				t.Fatalf("normalize does not know %v: add it", op)
			}
			if diff := cmp.Diff(n, c); diff != "" {
				t.Fatalf("the test command sets fields %v does not use (-normalized +command):\n%s", op, diff)
			}
			enc := AppendCommand(nil, &c)
			if got := decode(t, enc); !cmp.Equal(got, c) {
				t.Errorf("round trip (-want +got):\n%s", cmp.Diff(c, got))
			}

			// Bytes after the command are not its own.
			tail := append(bytes.Clone(enc), byte(OpTick), 0, 0, 0)
			var got Command
			m, err := DecodeCommand(tail, &got)
			if err != nil || m != len(enc) {
				t.Errorf("DecodeCommand with bytes after = %d, %v; want %d, nil", m, err, len(enc))
			}

			// AppendCommand appends.
			prefix := []byte("prefix")
			if enc2 := AppendCommand(prefix, &c); !bytes.Equal(enc2[:len(prefix)], prefix) || !bytes.Equal(enc2[len(prefix):], enc) {
				t.Errorf("AppendCommand(%q, c) = %x; want the prefix then %x", prefix, enc2, enc)
			}
		})
	}
}

// TestCommandFields checks that the codec carries exactly the fields that
// normalize keeps: a command with every field set decodes as its
// normalized self, and encodes as it.
func TestCommandFields(t *testing.T) {
	for _, op := range allOps() {
		full := fullCommand(op)
		want := full
		if !normalize(&want) {
			t.Errorf("normalize does not know %v: add it", op)
			continue
		}
		enc := AppendCommand(nil, &full)
		if got := decode(t, enc); !cmp.Equal(got, want) {
			t.Errorf("%v: decoding a command with every field set (-want +got):\n%s", op, cmp.Diff(want, got))
		}
		if enc2 := AppendCommand(nil, &want); !bytes.Equal(enc, enc2) {
			t.Errorf("%v: unused fields change the encoding: %x with, %x without", op, enc, enc2)
		}
	}
}

func TestCommandHeaderLayout(t *testing.T) {
	c := Command{Op: OpItemFlush, At: -1, Origin: 300, Seq: 1, Exptime: 2}
	want := []byte{byte(OpItemFlush), 0x01, 0xac, 0x02, 0x01, 0x04}
	if got := AppendCommand(nil, &c); !bytes.Equal(got, want) {
		t.Errorf("AppendCommand(%+v) = %x; want %x", c, got, want)
	}
}

func TestCommandEmptySlices(t *testing.T) {
	for _, tc := range []struct {
		name       string
		c, want    Command
		sameAsWant bool // encodes as want does
	}{
		{
			name:       "empty keys",
			c:          Command{Op: OpRelease, Session: 1, Req: latch.LockRequest{Keys: []string{}}},
			want:       Command{Op: OpRelease, Session: 1},
			sameAsWant: true,
		},
		{
			name: "empty key strings",
			c:    Command{Op: OpRelease, Session: 1, Req: latch.LockRequest{Keys: []string{"", "a", ""}}},
			want: Command{Op: OpRelease, Session: 1, Req: latch.LockRequest{Keys: []string{"", "a", ""}}},
		},
		{
			name:       "empty key and value",
			c:          Command{Op: OpItemSet, Key: []byte{}, Value: []byte{}},
			want:       Command{Op: OpItemSet},
			sameAsWant: true,
		},
	} {
		enc := AppendCommand(nil, &tc.c)
		got := decode(t, enc)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
		if tc.sameAsWant {
			if enc2 := AppendCommand(nil, &tc.want); !bytes.Equal(enc, enc2) {
				t.Errorf("%s: encodes as %x, the nil form as %x", tc.name, enc, enc2)
			}
		}
	}
}

func TestCommandExtremes(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = strings.Repeat(string(rune('a'+i%26)), i%(latch.MaxKeyLen+1))
	}
	for _, c := range []Command{
		{Op: OpTick, At: math.MinInt64, Origin: math.MaxUint64, Seq: math.MaxUint64},
		{Op: OpTick, At: math.MaxInt64},
		{Op: OpAcquire, Session: math.MaxUint64, Req: latch.LockRequest{
			Keys: many, Mode: latch.Exclusive, Limit: math.MaxUint32,
			Wait: math.MinInt64, Lease: math.MaxInt64, Relock: latch.RelockReject,
		}},
		{Op: OpOpenSession, TTL: -1, LockDelay: math.MinInt64},
		{Op: OpCancel, Waiter: engine.WaiterID(math.MaxUint64)},
		{Op: OpItemSet, Key: bytes.Repeat([]byte{0, '\r', '\n', ' ', 0xff}, 100), Value: make([]byte, 1<<16),
			Flags: math.MaxUint32, Exptime: math.MinInt64, CAS: math.MaxUint64},
		{Op: OpItemLock, Key: []byte("k"), LockMode: cache.LockOnly, Exptime: math.MaxInt64},
		{Op: OpItemLock, Key: []byte("k"), LockMode: cache.LockGet},
	} {
		enc := AppendCommand(nil, &c)
		if got := decode(t, enc); !cmp.Equal(got, c) {
			t.Errorf("%v: round trip (-want +got):\n%s", c.Op, cmp.Diff(c, got))
		}
	}
}

// TestDecodeCommandAliasing checks what the decoded command shares with
// its input: Key and Value do, with no room to append into the input;
// Req.Keys do not.
func TestDecodeCommandAliasing(t *testing.T) {
	set := testCommands()[OpItemSet]
	enc := AppendCommand(nil, &set)
	c := decode(t, enc)
	if cap(c.Key) != len(c.Key) || cap(c.Value) != len(c.Value) {
		t.Errorf("Key and Value have spare capacity: %d/%d, %d/%d", len(c.Key), cap(c.Key), len(c.Value), cap(c.Value))
	}
	i := bytes.Index(enc, set.Key)
	enc[i] ^= 0xff
	if c.Key[0] != enc[i] {
		t.Errorf("Key does not alias the input")
	}
	j := bytes.Index(enc, set.Value)
	enc[j] ^= 0xff
	if c.Value[0] != enc[j] {
		t.Errorf("Value does not alias the input")
	}

	acq := testCommands()[OpAcquire]
	enc = AppendCommand(nil, &acq)
	c = decode(t, enc)
	for i := range enc {
		enc[i] = 'X'
	}
	if !cmp.Equal(c.Req.Keys, acq.Req.Keys) {
		t.Errorf("Req.Keys changed with the input: %q; want %q", c.Req.Keys, acq.Req.Keys)
	}
}

// TestDecodeCommandOverwrites checks that DecodeCommand leaves nothing of
// the command it decodes into, and zeroes it on error.
func TestDecodeCommandOverwrites(t *testing.T) {
	c := fullCommand(OpAcquire)
	tick := Command{Op: OpTick, At: 5, Origin: 6, Seq: 7}
	if _, err := DecodeCommand(AppendCommand(nil, &tick), &c); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c, tick) {
		t.Errorf("decoding over a command (-want +got):\n%s", cmp.Diff(tick, c))
	}
	c = fullCommand(OpAcquire)
	if _, err := DecodeCommand([]byte{byte(OpTick)}, &c); err == nil {
		t.Fatal("DecodeCommand of a truncated tick succeeded")
	}
	if !cmp.Equal(c, Command{}) {
		t.Errorf("after an error, the command is %+v; want zero", c)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	for _, cmds := range [][]Command{nil, {hdr(OpTick, 1)}, testBatch(t)} {
		enc := AppendBatch(nil, cmds)
		if enc[0] != BatchVersion {
			t.Errorf("batch begins with %d; want the version %d", enc[0], BatchVersion)
		}
		// Decode into a batch holding something already, to see it reset.
		b := Batch{Cmds: []Command{fullCommand(OpAcquire), fullCommand(OpItemSet)}, Results: []Result{{Count: 1}}}
		if err := DecodeBatch(enc, &b); err != nil {
			t.Fatalf("DecodeBatch(AppendBatch(%d commands)): %v", len(cmds), err)
		}
		if len(b.Results) != 0 {
			t.Errorf("DecodeBatch left %d results", len(b.Results))
		}
		if len(b.Cmds) != len(cmds) || (len(cmds) > 0 && !cmp.Equal(b.Cmds, cmds)) {
			t.Errorf("batch round trip (-want +got):\n%s", cmp.Diff(cmds, b.Cmds))
		}
		if enc2 := AppendBatch(nil, b.Cmds); !bytes.Equal(enc, enc2) {
			t.Errorf("re-encoded batch differs:\n%x\n%x", enc, enc2)
		}
	}
}

func TestBatchLen(t *testing.T) {
	many := make([]Command, 300)
	for i := range many {
		many[i] = hdr(OpTick, uint64(i))
	}
	tests := []struct {
		name string
		data []byte
		want int
	}{
		{"empty batch", AppendBatch(nil, nil), 0},
		{"one", AppendBatch(nil, []Command{hdr(OpTick, 1)}), 1},
		{"a two-byte count", AppendBatch(nil, many), 300},
		{"no data", nil, 0},
		{"the version alone", []byte{BatchVersion}, 0},
		{"a count cut short", []byte{BatchVersion, 0x80}, 0},
	}
	for _, tt := range tests {
		if got := BatchLen(tt.data); got != tt.want {
			t.Errorf("%s: BatchLen = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBatchVersion1 checks the reading of version 1, the encoding before
// generations: it is the current one without Gen, its commands decode with
// Gen AnyGen, and it is canonical too.
func TestBatchVersion1(t *testing.T) {
	cmds := testBatch(t)
	want := make([]Command, len(cmds))
	v2 := []byte{BatchVersion, byte(len(cmds))}
	v1 := []byte{batchVersion1, byte(len(cmds))}
	for i, c := range cmds {
		want[i] = c
		enc := AppendCommand(nil, &c)
		if carriesGen(c.Op) {
			want[i].Gen = AnyGen
			// Gen, one byte here, follows the header and Session.
			c.Gen = 0
			g := len(AppendCommand(nil, &Command{Op: OpTick, At: c.At, Origin: c.Origin, Seq: c.Seq})) +
				len(binary.AppendUvarint(nil, uint64(c.Session)))
			v1 = append(v1, enc[:g]...)
			v1 = append(v1, enc[g+1:]...)
		} else {
			v1 = append(v1, enc...)
		}
		v2 = append(v2, enc...)
	}
	if got := AppendBatch(nil, cmds); !bytes.Equal(got, v2) {
		t.Fatalf("AppendBatch = %x; want %x", got, v2)
	}
	if got := appendBatch(nil, want, batchVersion1); !bytes.Equal(got, v1) {
		t.Errorf("appendBatch of version 1 = %x; want %x", got, v1)
	}
	var b Batch
	if err := DecodeBatch(v1, &b); err != nil {
		t.Fatalf("DecodeBatch of version 1: %v", err)
	}
	if diff := cmp.Diff(want, b.Cmds); diff != "" {
		t.Errorf("version 1 batch (-want +got):\n%s", diff)
	}
	// Re-encoded in the current version, AnyGen stays.
	var b2 Batch
	if err := DecodeBatch(AppendBatch(nil, b.Cmds), &b2); err != nil || !cmp.Equal(b2.Cmds, want) {
		t.Errorf("version 1 batch re-encoded: %v (-want +got):\n%s", err, cmp.Diff(want, b2.Cmds))
	}
}

// TestDecodeTruncated checks that every proper prefix of a valid encoding
// is rejected as malformed, command or batch.
func TestDecodeTruncated(t *testing.T) {
	cmds := testBatch(t)
	for i := range cmds {
		enc := AppendCommand(nil, &cmds[i])
		for n := range len(enc) {
			var c Command
			if _, err := DecodeCommand(enc[:n:n], &c); !errors.Is(err, ErrMalformed) {
				t.Errorf("%v: DecodeCommand of %d bytes of %d: %v; want ErrMalformed", cmds[i].Op, n, len(enc), err)
			}
		}
	}
	enc := AppendBatch(nil, cmds)
	var b Batch
	for n := range len(enc) {
		if err := DecodeBatch(enc[:n:n], &b); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeBatch of %d bytes of %d: %v; want ErrMalformed", n, len(enc), err)
		}
		if len(b.Cmds) != 0 {
			t.Errorf("DecodeBatch of %d bytes of %d left %d commands", n, len(enc), len(b.Cmds))
		}
	}
}

// raw builds an encoding by hand: each part is a byte, a []byte, a string
// (raw bytes), a uint64 (as a uvarint) or an int64 (as a varint).
func raw(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case byte:
			b = append(b, p)
		case Op:
			b = append(b, byte(p))
		case []byte:
			b = append(b, p...)
		case string:
			b = append(b, p...)
		case uint64:
			b = binary.AppendUvarint(b, p)
		case int64:
			b = binary.AppendVarint(b, p)
		default:
			panic("raw: unknown part")
		}
	}
	return b
}

func TestDecodeCommandRejects(t *testing.T) {
	// head is the header At, Origin, Seq, all 0.
	head := []byte{0, 0, 0}
	// acquire is OpAcquire up to its Mode, by session 1 of generation 0,
	// of key "a".
	acquire := raw(OpAcquire, head, uint64(1), uint64(0), uint64(1), uint64(1), "a")
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"op 0", raw(byte(0), head)},
		{"op numOps", raw(numOps, head)},
		{"op 255", raw(byte(255), head)},
		{"At truncated", raw(OpTick, byte(0x80))},
		{"At non-minimal", raw(OpTick, byte(0x80), byte(0), byte(0), byte(0))},
		{"At overlong", raw(OpTick, bytes.Repeat([]byte{0xff}, 10), byte(0x01), byte(0), byte(0))},
		{"At overflows", raw(OpTick, bytes.Repeat([]byte{0xff}, 9), byte(0x02), byte(0), byte(0))},
		{"Origin non-minimal", raw(OpTick, byte(0), byte(0x81), byte(0), byte(0))},
		{"Seq overflows", raw(OpTick, byte(0), byte(0), bytes.Repeat([]byte{0x80}, 11))},
		{"keys count above the bytes left", raw(OpRelease, head, uint64(1), uint64(0), uint64(3), uint64(0), uint64(0))},
		{"keys count huge", raw(OpRelease, head, uint64(1), uint64(0), uint64(math.MaxUint64), uint64(0))},
		{"key length above the bytes left", raw(OpRelease, head, uint64(1), uint64(0), uint64(2), uint64(1), "a", uint64(5), "bcd")},
		{"key length huge", raw(OpRelease, head, uint64(1), uint64(0), uint64(1), uint64(math.MaxUint64), "abc")},
		{"Gen truncated", raw(OpKeepAlive, head, uint64(1))},
		{"Gen non-minimal", raw(OpKeepAlive, head, uint64(1), byte(0x80), byte(0))},
		{"Gen overflows", raw(OpKeepAlive, head, uint64(1), bytes.Repeat([]byte{0xff}, 10), byte(0x01))},
		{"Mode 2", raw(acquire, byte(2), uint64(0), int64(0), int64(0), byte(0))},
		{"Mode 255", raw(acquire, byte(255), uint64(0), int64(0), int64(0), byte(0))},
		{"Limit above 32 bits", raw(acquire, byte(1), uint64(1<<32), int64(0), int64(0), byte(0))},
		{"Relock 2", raw(acquire, byte(0), uint64(0), int64(0), int64(0), byte(2))},
		{"acquire without Relock", raw(acquire, byte(0), uint64(0), int64(0), int64(0))},
		{"LockMode 3", raw(OpItemLock, head, uint64(1), uint64(1), "k", int64(0), byte(3))},
		{"Key length above the bytes left", raw(OpForceRelease, head, uint64(4), "abc")},
		{"Key length huge", raw(OpForceRelease, head, uint64(math.MaxUint64), "abc")},
		{"Value length above the bytes left", raw(OpItemSet, head, uint64(0), uint64(1), "k", uint64(10), "v", uint64(0), int64(0), uint64(0))},
		{"Flags above 32 bits", raw(OpItemSet, head, uint64(0), uint64(1), "k", uint64(1), "v", uint64(math.MaxUint32+1), int64(0), uint64(0))},
		{"Delta overflows", raw(OpItemIncr, head, uint64(0), uint64(1), "k", uint64(0), int64(0), bytes.Repeat([]byte{0xff}, 10), uint64(0))},
	} {
		c := fullCommand(OpAcquire)
		n, err := DecodeCommand(tc.b, &c)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeCommand(%x) = %d, %v; want ErrMalformed", tc.name, tc.b, n, err)
			continue
		}
		if n != 0 || !cmp.Equal(c, Command{}) {
			t.Errorf("%s: DecodeCommand(%x) = %d, %+v on error; want 0 and a zero command", tc.name, tc.b, n, c)
		}
		if !strings.HasPrefix(err.Error(), "fsm: decode ") {
			t.Errorf("%s: error %q does not begin with \"fsm: decode \"", tc.name, err)
		}
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	tick := raw(OpTick, byte(0), byte(0), byte(0))
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"version 0", raw(byte(0), uint64(0)), ErrVersion},
		{"version 3", raw(byte(3), uint64(1), tick), ErrVersion},
		{"version 255", raw(byte(255)), ErrVersion},
		{"no count", raw(byte(BatchVersion)), ErrMalformed},
		{"count non-minimal", raw(byte(BatchVersion), byte(0x81), byte(0), tick), ErrMalformed},
		{"count above what the bytes hold", raw(byte(BatchVersion), uint64(2), tick, "xyz"), ErrMalformed},
		{"count huge", raw(byte(BatchVersion), uint64(math.MaxUint64), tick), ErrMalformed},
		{"trailing byte", raw(byte(BatchVersion), uint64(1), tick, byte(0)), ErrMalformed},
		{"trailing command", raw(byte(BatchVersion), uint64(1), tick, tick), ErrMalformed},
		{"empty with trailing bytes", raw(byte(BatchVersion), uint64(0), tick), ErrMalformed},
		{"bad command", raw(byte(BatchVersion), uint64(2), tick, byte(0), byte(0), byte(0), byte(0)), ErrMalformed},
	} {
		b := Batch{Cmds: []Command{fullCommand(OpItemSet)}}
		err := DecodeBatch(tc.b, &b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeBatch(%x) = %v; want %v", tc.name, tc.b, err, tc.want)
		}
		if tc.want == ErrVersion && errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeBatch(%x) = %v, which is ErrMalformed too", tc.name, tc.b, err)
		}
		if len(b.Cmds) != 0 {
			t.Errorf("%s: DecodeBatch left %d commands after an error", tc.name, len(b.Cmds))
		}
	}
}

func TestAppendCommandPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Command
	}{
		{"op 0", Command{}},
		{"op numOps", Command{Op: numOps}},
		{"op 255", Command{Op: 255}},
		{"Mode 2", Command{Op: OpAcquire, Req: latch.LockRequest{Mode: 2}}},
		{"Relock 2", Command{Op: OpAcquire, Req: latch.LockRequest{Relock: 2}}},
		{"LockMode 3", Command{Op: OpItemLock, LockMode: 3}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: AppendCommand did not panic", tc.name)
				}
			}()
			AppendCommand(nil, &tc.c)
		}()
	}

	// A mode an op does not use is not looked at.
	c := Command{Op: OpRelease, Req: latch.LockRequest{Mode: 9, Relock: 9}, LockMode: 9}
	want := Command{Op: OpRelease}
	if got := decode(t, AppendCommand(nil, &c)); !cmp.Equal(got, want) {
		t.Errorf("release with unused invalid modes (-want +got):\n%s", cmp.Diff(want, got))
	}
}

func TestAppendAllocs(t *testing.T) {
	cmds := testBatch(t)
	buf := make([]byte, 0, 4096)
	for i := range cmds {
		c := &cmds[i]
		if n := testing.AllocsPerRun(100, func() { buf = AppendCommand(buf[:0], c) }); n != 0 {
			t.Errorf("%v: AppendCommand into a buffer with room allocates %v times; want 0", c.Op, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { buf = AppendBatch(buf[:0], cmds) }); n != 0 {
		t.Errorf("AppendBatch into a buffer with room allocates %v times; want 0", n)
	}
}

func TestDecodeAllocs(t *testing.T) {
	cases := testCommands()
	for _, tc := range []struct {
		op   Op
		want float64
	}{
		{OpTick, 0},
		{OpItemSet, 0}, // Key and Value alias the input
		{OpItemLock, 0},
		{OpAcquire, 2}, // the []string and one string for all keys
		{OpRelease, 2},
	} {
		c := cases[tc.op]
		b := AppendCommand(nil, &c)
		var got Command
		n := testing.AllocsPerRun(100, func() {
			if _, err := DecodeCommand(b, &got); err != nil {
				panic(err)
			}
		})
		if n != tc.want {
			t.Errorf("%v: DecodeCommand allocates %v times; want %v", tc.op, n, tc.want)
		}
	}

	// A batch decoded into a batch with room allocates only for keys.
	var cmds []Command
	for _, op := range []Op{OpItemSet, OpItemGetAndTouch, OpTick, OpItemIncr, OpItemLock} {
		cmds = append(cmds, cases[op])
	}
	data := AppendBatch(nil, cmds)
	var b Batch
	n := testing.AllocsPerRun(100, func() {
		if err := DecodeBatch(data, &b); err != nil {
			panic(err)
		}
	})
	if n != 0 {
		t.Errorf("DecodeBatch of item commands allocates %v times; want 0", n)
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	cmds := testBatch(b)
	buf := AppendBatch(nil, cmds)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBatch(buf[:0], cmds)
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	data := AppendBatch(nil, testBatch(b))
	var batch Batch
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeBatch(data, &batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSetItem checks that SetItem copies every field an item command
// reads, and ResetItem zeroes every one but Op, At and Key: a command made
// by either, over a slot holding another command's fields, encodes and
// applies as the command it copies.
func TestSetItem(t *testing.T) {
	for _, op := range allOps() {
		if !op.IsItem() {
			if op >= OpItemSet && op <= OpItemEvict {
				t.Errorf("%v.IsItem() = false", op)
			}
			continue
		}
		t.Run(op.String(), func(t *testing.T) {
			in := fullCommand(op)
			in.At = t0 // a realistic time, for Apply
			in.Key = []byte("key")
			in.Value = []byte("42")
			in.Exptime = 0
			c := otherCommand()
			c.Origin, c.Seq = in.Origin, in.Seq
			c.SetItem(&in)
			want, got := in, c
			normalize(&want)
			normalize(&got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("SetItem (-want +got):\n%s", diff)
			}
			if enc, encIn := AppendCommand(nil, &c), AppendCommand(nil, &in); !bytes.Equal(enc, encIn) {
				t.Errorf("SetItem's command encodes as %x, the original as %x", enc, encIn)
			}
			var outs [2]outcome
			for i, cmd := range []*Command{&in, &c} {
				s := newState(t)
				var r Result
				s.Apply(&Command{Op: OpOpenSession, At: t0 - 2}, &r)
				s.Apply(&Command{Op: OpItemSet, At: t0 - 1, Key: []byte("key"), Value: []byte("7")}, &r)
				outs[i] = apply(s, cmd)
			}
			if diff := cmp.Diff(outs[0], outs[1], cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("SetItem's command applies otherwise (-original +copy):\n%s", diff)
			}

			r := otherCommand()
			r.Origin, r.Seq = in.Origin, in.Seq
			r.ResetItem(op, in.At, in.Key)
			got = r
			normalize(&got)
			want = Command{Op: op, At: in.At, Origin: in.Origin, Seq: in.Seq, Key: in.Key}
			normalize(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ResetItem (-want +got):\n%s", diff)
			}
		})
	}
}

// otherCommand returns a command with every field set, to values other
// than fullCommand's: a slot that held another command.
func otherCommand() Command {
	c := fullCommand(OpAcquire)
	c.At, c.Session, c.Gen = t0-1, 70, 60
	c.Key, c.Value = []byte("other"), []byte("other value")
	c.Flags, c.Exptime, c.CAS, c.Delta = 20, 21, 22, 23
	c.LockMode = cache.LockTouch
	return c
}
